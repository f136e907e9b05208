"""The JSON compiler spec and the registry: parsing, building, located errors."""

from __future__ import annotations

import pytest

from app.domain.compilers.base import Compiled, Compiler, Snapshot
from app.domain.compilers.registry import BUILTINS, Registry, build, names
from app.domain.compilers.spec import CompilerSpec, Component, dotted, parse_spec
from app.domain.errors import InvalidInput, UnknownName
from tests.unit.compiler_builders import items, seqs, snapshot, user


def problems_of(raw: object) -> list[tuple[tuple[str | int, ...], str]]:
    with pytest.raises(InvalidInput) as caught:
        build(parse_spec(raw))
    return list(caught.value.problems)


def test_a_bare_name_stands_for_a_component_without_params() -> None:
    spec = parse_spec({"base": "all_sections", "decorators": ["redact"]})
    expected = CompilerSpec(
        base=Component(name="all_sections"), decorators=(Component(name="redact"),)
    )
    assert spec == expected


def test_an_empty_spec_is_the_default_compiler() -> None:
    assert parse_spec({}).base == Component(name="current_tool_trace", params={})


def test_unknown_spec_fields_are_refused_with_their_paths() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_spec({"base": "all_sections", "decorator": [], "decorators": [{"nme": "x"}]})
    paths = {path for path, _ in caught.value.problems}
    assert ("compiler", "decorator") in paths
    assert ("compiler", "decorators", 0, "nme") in paths


def test_an_unknown_base_lists_the_available_ones() -> None:
    with pytest.raises(UnknownName) as caught:
        build(parse_spec({"base": "everything"}))
    err = caught.value
    assert (err.kind, err.name, err.field) == ("compiler", "everything", "compiler.base.name")
    assert err.available == ("all_sections", "current_tool_trace", "selected_sections")


def test_an_unknown_decorator_names_its_position() -> None:
    with pytest.raises(UnknownName) as caught:
        build(parse_spec({"decorators": ["redact", "compress"]}))
    assert caught.value.field == "compiler.decorators[1].name"
    assert "token_limit" in caught.value.available


def test_bad_params_are_located() -> None:
    found = problems_of(
        {"decorators": [{"name": "token_limit", "params": {"max_tokens": "9", "low_water": 2}}]}
    )
    assert {path for path, _ in found} == {
        ("compiler", "decorators", 0, "params", "max_tokens"),
        ("compiler", "decorators", 0, "params", "low_water"),
    }


def test_params_are_strict_no_booleans_for_numbers() -> None:
    found = problems_of({"decorators": [{"name": "window", "params": {"rounds": True}}]})
    assert found[0][0] == ("compiler", "decorators", 0, "params", "rounds")


def test_an_unexpected_param_is_named() -> None:
    found = problems_of({"base": {"name": "selected_sections", "params": {"section": ["x"]}}})
    assert found[0] == (("compiler", "base", "params", "section"), "Unexpected keyword argument")


def test_a_string_is_not_a_list_of_sections() -> None:
    found = problems_of({"base": {"name": "selected_sections", "params": {"sections": "summary"}}})
    assert found[0][0] == ("compiler", "base", "params", "sections")


def test_a_factorys_own_check_is_located_under_its_params() -> None:
    found = problems_of({"decorators": [{"name": "window", "params": {}}]})
    message = "give exactly one of messages or rounds"
    assert found == [(("compiler", "decorators", 0, "params"), message)]


def test_an_invalid_custom_regex_is_located() -> None:
    found = problems_of({"decorators": [{"name": "redact", "params": {"patterns": ["a", "[z"]}}]})
    assert found[0][0] == ("compiler", "decorators", 0, "params", "patterns", 1)


def test_the_first_listed_decorator_is_innermost() -> None:
    calls: list[str] = []

    def tracing(inner: Compiler, label: str) -> Compiler:
        def compile_tracing(snap: Snapshot) -> Compiled:
            calls.append(f"enter {label}")
            return inner(snap)

        return compile_tracing

    registry = BUILTINS.with_decorator("trace", tracing)
    spec = parse_spec(
        {
            "decorators": [
                {"name": "trace", "params": {"label": "first"}},
                {"name": "trace", "params": {"label": "second"}},
            ]
        }
    )
    build(spec, registry)(snapshot(items(user())))
    assert calls == ["enter second", "enter first"]


def test_a_registry_is_a_value_extended_without_changing_the_original() -> None:
    extra = Registry(bases={"nothing": lambda: lambda snap: Compiled(())})
    merged = BUILTINS.merged(extra)
    assert "nothing" in merged.bases and "nothing" not in BUILTINS.bases
    assert seqs(build(parse_spec({"base": "nothing"}), merged)(snapshot(items(user())))) == []
    assert names(merged)["bases"] == [
        "all_sections",
        "current_tool_trace",
        "nothing",
        "selected_sections",
    ]


def test_build_takes_a_field_prefix_for_its_errors() -> None:
    with pytest.raises(UnknownName) as caught:
        build(parse_spec({"base": "x"}), prefix="session.compiler")
    assert caught.value.field == "session.compiler.base.name"


def test_dotted_paths_read_like_json_paths() -> None:
    assert dotted(("compiler", "decorators", 1, "params", "patterns", 0)) == (
        "compiler.decorators[1].params.patterns[0]"
    )


def test_a_transform_after_a_trim_is_refused() -> None:
    """redact after token_limit could push the trimmed view past its budget."""
    from app.domain.compilers.registry import build
    from app.domain.compilers.spec import parse_spec
    from app.domain.errors import InvalidInput

    spec = parse_spec({"decorators": ["token_limit", "redact"]})
    with pytest.raises(InvalidInput) as caught:
        build(spec)
    assert caught.value.problems[0][0] == ("compiler", "decorators", 1, "name")
    build(parse_spec({"decorators": ["redact", "token_limit"]}))
