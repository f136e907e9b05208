"""Answers kept per value (app/domain/memo.py): computed once while the value lives, gone with
it (in every function that kept one), never given to another value that takes its identity, and
held in few objects the garbage collector has to walk."""

from __future__ import annotations

import gc

from app.domain import memo
from app.domain.memo import per_value
from app.domain.messages import Message, TextPart


def message(text: str) -> Message:
    return Message(role="user", content=(TextPart(text=text),))


calls: list[tuple[str, str]] = []


@per_value
def shout(value: Message, how: str) -> str:
    calls.append((value.text, how))
    return value.text.upper() + how


@per_value
def size(value: Message, how: str) -> int:
    return len(value.text) + len(how)


def test_an_answer_is_computed_once_per_value_and_argument() -> None:
    calls.clear()
    kept = message("hi")
    assert [shout(kept, "!"), shout(kept, "!"), shout(kept, "?")] == ["HI!", "HI!", "HI?"]
    assert calls == [("hi", "!"), ("hi", "?")]


def test_answers_go_with_their_value_in_every_function() -> None:
    before = len(memo._REFS)
    values = [message(f"m{n}") for n in range(100)]
    for value in values:
        shout(value, "!")
        size(value, "!")
    assert len(memo._REFS) == before + 100  # one reference per value, whichever functions
    ids = {id(value) for value in values}
    del values, value
    assert len(memo._REFS) == before
    assert not any(key in ids for found in memo._MEMOS for key in found)


def test_a_value_that_takes_a_freed_one_s_identity_gets_its_own_answer() -> None:
    calls.clear()
    first = message("old")
    assert shout(first, "!") == "OLD!"
    freed = id(first)
    del first
    for _ in range(10_000):  # CPython hands a freed object's memory out again soon
        second = message("new")
        if id(second) == freed:
            break
    assert id(second) == freed
    assert shout(second, "!") == "NEW!"
    assert calls[-1] == ("new", "!")


def test_answers_a_failed_callback_left_are_not_given_to_another_value() -> None:
    first = message("old")
    assert shout(first, "!") == "OLD!"
    freed = id(first)
    del memo._REFS[freed]  # its reference freed first: no callback runs when the value goes
    del first
    for _ in range(10_000):
        second = message("new")
        if id(second) == freed:
            break
    assert id(second) == freed
    assert shout(second, "!") == "NEW!"


def test_one_reference_per_value_whichever_functions_ask() -> None:
    value = message("one")
    shout(value, "!")
    ref = memo._REFS[id(value)]
    size(value, "!")
    shout(value, "?")
    assert memo._REFS[id(value)] is ref


class Node:
    """A value in a reference cycle: freed by the collector, not by its count."""

    def __init__(self) -> None:
        self.me = self


@per_value
def named(value: Node, how: str) -> str:
    return f"node{how}"


def test_answers_of_a_value_freed_by_the_collector_go() -> None:
    node = Node()
    assert named(node, "!") == "node!"
    key = id(node)
    del node
    gc.collect()
    assert key not in memo._REFS
    assert not any(key in found for found in memo._MEMOS)


def test_kept_answers_add_few_objects_for_the_collector() -> None:
    values = [message(f"m{n}") for n in range(1_000)]
    gc.collect()
    before = len(gc.get_objects())
    for value in values:
        shout(value, "!")
        size(value, "!")
    gc.collect()
    # A reference per value and a dict of answers per value and function.
    assert len(gc.get_objects()) - before <= 3 * len(values)
