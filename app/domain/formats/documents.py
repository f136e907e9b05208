"""Stored messages in a provider's shape, each provider message with the seq it was stored at.

The messages page, the compaction archive and the tool-call originals all render through these,
so a message reads the same wherever it is found. Within one provider's shape the conversion is
lossless (see ``openai``, ``anthropic`` and ``responses``); across providers it is best effort.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.formats._anthropic_blocks import write_block
from app.domain.formats._gemini_parts import write_call as write_gemini_call
from app.domain.formats._gemini_parts import write_response
from app.domain.formats._openai_parts import write_tool_call
from app.domain.formats._responses_parts import write_call, write_output
from app.domain.formats.anthropic import System, in_messages, to_anthropic
from app.domain.formats.gemini import to_gemini
from app.domain.formats.openai import openai_messages
from app.domain.formats.responses import (
    instruction_flags,
    instructions_text,
    responses_items,
)
from app.domain.formats.targets import Target
from app.domain.messages import JSONObject, Message, ToolCallPart, ToolResultPart, provider_meta

Provider = Target
Stored = tuple[int, Message]  # (seq, message)


@dataclass(frozen=True)
class Document:
    """A provider document: ``seqs[i]`` is the stored seq of ``messages[i]`` (for Responses,
    ``messages`` are the ``input`` items)."""

    system: System | JSONObject  # Anthropic's `system`, Gemini's `systemInstruction`
    messages: list[JSONObject]
    seqs: list[int]
    instructions: str | None = None


def provider_document(fmt: Provider, stored: Sequence[Stored]) -> Document:
    """OpenAI messages (a message with several tool results becomes several, each with its
    seq), Anthropic ``system`` and turns (a system message sent inside Anthropic ``messages`` is
    a turn, with its seq), Gemini ``systemInstruction`` and contents (system
    messages go to the system prompt, without a seq), or Responses ``instructions`` and items
    (each item with the seq of its message)."""
    if fmt == "responses":
        return _responses_document(stored)
    if fmt == "openai":
        messages: list[JSONObject] = []
        seqs: list[int] = []
        for seq, message in stored:
            converted = openai_messages(message)
            messages += converted
            seqs += [seq] * len(converted)
        return Document(None, messages, seqs)
    if fmt == "gemini":
        instruction, contents = to_gemini([message for _, message in stored])
        return Document(instruction, contents, [seq for seq, m in stored if m.role != "system"])
    system, turns = to_anthropic([message for _, message in stored])
    # A system message sent inside Anthropic `messages` is a turn there, with its seq.
    return Document(
        system, turns, [seq for seq, m in stored if m.role != "system" or in_messages(m)]
    )


def _responses_document(stored: Sequence[Stored]) -> Document:
    flags = instruction_flags([message for _, message in stored])
    head = [message for (_, message), flag in zip(stored, flags, strict=True) if flag]
    items: list[JSONObject] = []
    seqs: list[int] = []
    for (seq, message), flag in zip(stored, flags, strict=True):
        if not flag:
            converted = responses_items(message)
            items += converted
            seqs += [seq] * len(converted)
    return Document(None, items, seqs, instructions_text(head))


def call_shape(fmt: Provider, call: ToolCallPart) -> JSONObject:
    """OpenAI: the assistant message's ``tool_calls`` entry; Anthropic: the ``tool_use`` block;
    Gemini: the ``functionCall`` object; Responses: the ``function_call`` item."""
    if fmt == "openai":
        return write_tool_call(call)
    if fmt == "gemini":
        return write_gemini_call(call)
    if fmt == "responses":
        return write_call(call)
    return _block(call)


def result_shape(fmt: Provider, message: Message, result: ToolResultPart) -> JSONObject:
    """OpenAI: the ``tool`` message (as the messages page gives it, ``message`` being the stored
    message holding ``result``); Anthropic: the ``tool_result`` block; Gemini: the
    ``functionResponse`` object; Responses: the ``function_call_output`` item."""
    if fmt == "anthropic":
        return _block(result)
    if fmt == "gemini":
        hint = provider_meta(result.metadata, "gemini")
        name = hint.get("name")
        named = name if isinstance(name, str) else result.call_id
        return write_response(result, named, hint.get("id") != "absent")
    if fmt == "responses":
        return write_output(result)
    if message.role in ("tool", "user") and result in message.tool_results:
        # A message's tool results become its first OpenAI messages, one each, in order.
        return openai_messages(message)[message.tool_results.index(result)]
    return openai_messages(Message(role="tool", content=(result,)))[0]


def _block(part: ToolCallPart | ToolResultPart) -> JSONObject:
    block = write_block(part)
    if block is None:  # only another provider's opaque block has none
        raise ValueError("a tool part always has a block")
    return block
