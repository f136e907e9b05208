"""Provider-valid output, always (DESIGN.md section 4).

- ``openai_problems`` / ``anthropic_problems`` / ``gemini_problems`` / ``responses_problems``:
  the structural rules each provider's API enforces on a request's messages, as readable
  problems naming the message index (tests run them on every compile output;
  ``request_problems`` picks the target's).
- ``make_valid``: repairs canonical messages for a target (tool calls and results paired within
  their round, duplicate or malformed ids renamed, parts the target refuses dropped, empty
  messages dropped), one warning per change; the input is never modified.
- ``render``: ``make_valid``, the converters, then the provider's shape (for Anthropic: system
  moved out, same-role turns merged, tool results and thinking first, a user turn first, no
  trailing whitespace in a final assistant turn; for Gemini: system moved to the system
  instruction, same-role turns merged, each function call turn answered by the next turn with
  exactly its responses in call order, a user turn first; for Responses: leading system
  messages as ``instructions``, reasoning kept only before what it produced, item ids the API
  takes).

Whatever canonical history the app accepts, ``render`` gives a request every validator passes,
except that the message list may come out empty (nothing sendable, or only system content for
Anthropic and Gemini): the compile step refuses to send an empty list.
"""

from app.domain.formats.targets import TARGETS, Target
from app.domain.validity.anthropic_rules import anthropic_problems
from app.domain.validity.gemini_rules import gemini_problems
from app.domain.validity.openai_rules import openai_problems
from app.domain.validity.repair import Entry, make_valid, repair
from app.domain.validity.responses_rules import responses_problems
from app.domain.validity.rules import request_problems
from app.domain.validity.shaping import render, shape

__all__ = [
    "TARGETS",
    "Entry",
    "Target",
    "anthropic_problems",
    "gemini_problems",
    "make_valid",
    "openai_problems",
    "render",
    "repair",
    "request_problems",
    "responses_problems",
    "shape",
]
