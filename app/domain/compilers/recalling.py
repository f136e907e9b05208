"""The ``recall`` decorator: the compile offers the model a tool that returns compacted originals.

With it, every placeholder and preview in the view names the call that returns its original
(``Snapshot.recall``) and the compile adds the tool's definition, in the target's shape, to the
request (``Compiled.tools``), its tokens claimed in the budget. It must wrap every step that
writes placeholders or trims (the registry checks the order): they see the flag and the claim.
The tool reads a stored session's originals, so a compile of a posted history refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Annotated

from pydantic import Field

from app.domain.compilers.base import Compiled, Compiler, Snapshot
from app.domain.errors import InvalidParams
from app.domain.messages import JSONObject, Message, TextPart
from app.domain.recall import DEFAULT_NAME, definition

# OpenAI's rule for function names (the strictest of the shapes).
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"


def tools_tokens(count: Callable[[Message], int], tools: Iterable[JSONObject]) -> int:
    """Tokens of tool definitions, counted as their JSON (providers render tool schemas in an
    unpublished way: an estimate, as the caller's tools are counted)."""
    text = [json.dumps(tool, ensure_ascii=False) for tool in tools]
    return sum(count(Message(role="user", content=(TextPart(text=t),))) for t in text)


def recall(
    inner: Compiler, name: Annotated[str, Field(pattern=TOOL_NAME)] = DEFAULT_NAME
) -> Compiler:
    """Offer the recall tool ``name``: placeholders and previews name the call that returns
    their original, and the request carries the tool (see POST /v1/sessions/{id}/recall)."""

    def compile_recall(snapshot: Snapshot) -> Compiled:
        if snapshot.session_id is None:
            raise InvalidParams(
                [
                    (
                        (),
                        (
                            "recall reads a stored session's originals: compile a session "
                            "(POST /v1/sessions/{id}/compile)"
                        ),
                    )
                ]
            )
        tool = definition(snapshot.target or "openai", name)
        claimed = snapshot.claiming(tools_tokens(snapshot.count, [tool]))
        compiled = inner(replace(claimed, recall=name))
        return replace(compiled, tools=(*compiled.tools, tool))

    return compile_recall
