"""Compile use cases: a posted history (stateless) or a stored session (recorded).

`request`: what a compile is asked (``Options``), needs (``Context``) and answers
(``Compilation``); `posted`: a posted history; `session`: a stored session, in its steps;
`tails`: the tail of a long history a compile reads, kept for the next; `digesting`: the
digests made after a compile; `stored`: stored messages parsed once; `tokens`: counting a
posted request; `plugins`: compilers installed as Python packages.
"""

from app.services.compiling.posted import Posted, compile_posted
from app.services.compiling.request import (
    DEFAULT_COMPILE_SPEC,
    Caller,
    Compilation,
    Context,
    Mode,
    Options,
    Read,
    parse_posted,
    tools_tokens,
)
from app.services.compiling.session import compile_session
from app.services.compiling.stored import item_of

__all__ = [
    "DEFAULT_COMPILE_SPEC",
    "Caller",
    "Compilation",
    "Context",
    "Mode",
    "Options",
    "Posted",
    "Read",
    "compile_posted",
    "compile_session",
    "item_of",
    "parse_posted",
    "tools_tokens",
]
