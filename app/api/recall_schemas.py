"""Bodies of the recall endpoint: the model's call of the recall tool in, its result out."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from app.api.schemas import NO_NUL, Body, JSONObject
from app.domain.compilers.recalling import TOOL_NAME
from app.domain.formats.targets import Target
from app.domain.recall import DEFAULT_NAME, MAX_PAGE_TOKENS, MIN_PAGE_TOKENS, PAGE_TOKENS

RecallShape = Target


class RecallRequest(Body):
    """The model's call of the recall tool, passed on as the caller got it."""

    format: RecallShape | None = Field(
        None, description="The tool result's shape (default: the session's provider's)."
    )
    tool_call_id: str | None = Field(
        None,
        min_length=1,
        max_length=512,
        pattern=NO_NUL,
        description="The id of the model's call (OpenAI `id`, Anthropic `tool_use` `id`, "
        "Responses `call_id`, Gemini `functionCall.id` where it has one).",
    )
    name: str = Field(
        DEFAULT_NAME, pattern=TOOL_NAME, description="The tool's name, as the decorator set it."
    )
    arguments: JSONObject | str = Field(
        description="The call's arguments as the model gave them: an object, or its JSON text "
        '(OpenAI). `{"call_id": ..., "seq": ...}`, `{"seq": ...}` (a message) or '
        '`{"sha256": ...}`, with `offset` for a later page. What the model got wrong here is '
        "answered as a tool error, not refused.",
    )
    max_tokens: int = Field(
        PAGE_TOKENS,
        ge=MIN_PAGE_TOKENS,
        le=MAX_PAGE_TOKENS,
        description="A page's size: at most this many tokens of the original, in the "
        "session's encoding (plus the line naming the next page).",
    )

    @model_validator(mode="after")
    def _call_id(self) -> RecallRequest:
        if self.tool_call_id is None and self.format != "gemini":
            raise ValueError("tool_call_id is required (but for the gemini format)")
        return self


class RecallPage(BaseModel):
    offset: int = Field(description="The page's first character in the original text.")
    chars: int = Field(description="Its length: the result text's first `chars` characters.")
    total_chars: int = Field(description="The original text's length.")
    next_offset: int | None = Field(description="Where the next page starts (null: the last).")


class RecallResult(BaseModel):
    format: RecallShape
    result: JSONObject = Field(
        description="The tool result to append: OpenAI's `tool` message, Anthropic's "
        "`tool_result` block, a Responses `function_call_output` item, a Gemini "
        "`functionResponse` part (Anthropic's and Gemini's go in the user turn answering the "
        "call)."
    )
    is_error: bool = Field(description="The call named nothing recallable; the text says why.")
    page: RecallPage | None = Field(description="Which part of the original the text holds.")
