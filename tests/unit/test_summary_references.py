"""What counts as a file path, a URL and an identifier: the references a summary never drops."""

from __future__ import annotations

import base64

import pytest

from app.domain.summaries.references import References, find_references, word_kind


def refs(text: str) -> References:
    return find_references([text])


def test_urls_lose_trailing_punctuation_but_keep_balanced_brackets() -> None:
    found = refs("See https://en.wikipedia.org/wiki/Python_(language)). Or (ftp://h.org/a.txt)?")
    assert found.urls == ("https://en.wikipedia.org/wiki/Python_(language)", "ftp://h.org/a.txt")
    assert found.paths == ()  # a URL's path is not listed again


@pytest.mark.parametrize(
    "path",
    [
        "src/app/main.py",
        "/etc/hosts",
        "./run.sh",
        "~/notes/todo",
        "../up/a.txt",
        "a/b",
        "node_modules/@types/node/index.d.ts",
        "C:\\Users\\me\\file.txt",
        ".\\build.ps1",
        "README.md",
        "pyproject.toml",
        "Makefile",
        ".env.local",
        "data-2024_v2.csv",
    ],
)
def test_file_paths(path: str) -> None:
    assert refs(f"Look at {path}, then stop.").paths == (path,)


@pytest.mark.parametrize(
    "identifier",
    [
        "load_counter",
        "MAX_BODY_BYTES",
        "__init__",
        "TokenCounter",
        "getUser",
        "HTTPServer",
        "E501",
        "gpt-4o-mini",
        "v1.2.3",
        "os.path.join",
        "3fa9c2d",
        "#123",
        "JIRA-42",
        "CVE-2024-1234",
        "--dry-run",
        "123e4567-e89b-12d3-a456-426614174000",
    ],
)
def test_identifiers(identifier: str) -> None:
    assert refs(f"Then {identifier} ran.").identifiers == (identifier,)


def test_a_code_span_is_an_identifier() -> None:
    assert refs("Call `main` or `make test`.").identifiers == ("main",)


def test_plain_prose_and_numbers_are_not_references() -> None:
    text = "Hello NASA, e.g. the well-known fix took 1.5 s on port 8080 (not 1234567), i.e. fine."
    assert refs(text) == References()


def test_line_references_keep_the_path_and_the_test_name_apart() -> None:
    found = refs("FAILED tests/test_app.py::test_boot - KeyError: 'port' at src/app.py:12")
    assert found.paths == ("tests/test_app.py", "src/app.py")
    assert found.identifiers == ("test_boot", "KeyError")


def test_a_method_after_a_string_is_not_a_dotfile() -> None:
    found = refs('line = ", ".join(parts).strip() + open(".gitignore").read()')
    assert found.paths == (".gitignore",)
    assert found.identifiers == ()


def test_long_runs_are_data_not_references() -> None:
    blob = base64.b64encode(bytes(range(256)) * 4).decode()
    assert refs(f"image {blob} end") == References()


def test_escaped_newlines_are_not_windows_paths() -> None:
    assert refs("text\\nmore\\tend").paths == ()


def test_each_reference_is_listed_once_in_order_of_appearance() -> None:
    found = find_references(["b.py a.py b.py call_1"], names=["call_1", "read", "a.py"])
    assert found.paths == ("b.py", "a.py")
    assert found.identifiers == ("call_1", "read")
    assert found.values() == ("b.py", "a.py", "call_1", "read")


def test_word_kinds() -> None:
    assert word_kind("main.py") == "path"
    assert word_kind("snake_case") == "identifier"
    assert word_kind("hello") is None
    assert word_kind("") is None
