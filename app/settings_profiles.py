"""``CTXC_SUMMARIZER_PROFILES``: the deployment's named summariser profiles, read and checked
when the service starts (``Settings`` adds ``default``, from the ``CTXC_SUMMARIZER*`` settings)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from app.domain.summaries.profiles import NAME_PATTERN, RESERVED, ProfileSpec

ENV = "CTXC_SUMMARIZER_PROFILES"
NEEDS = {
    "ledger": (),
    "extractive": (),
    "openai": ("url", "model"),
    "anthropic": ("model", "api_key"),
    "webhook": ("url", "webhook_secret"),
}
_SPECS = TypeAdapter(dict[str, ProfileSpec])
_NAME = re.compile(NAME_PATTERN)


def declared_profiles(value: str | None) -> dict[str, ProfileSpec]:
    """The profiles in ``value`` (a JSON object or the path of a file holding one); a
    ValueError naming each problem when they are unusable (secrets are never shown)."""
    if value is None or not value.strip():
        return {}
    text = value
    if not value.lstrip().startswith(("{", "[")):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{ENV} is neither a JSON object nor a readable file: {exc}") from None
    try:
        specs = _SPECS.validate_python(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{ENV} is not valid JSON: {exc}") from None
    except ValidationError as exc:
        raise ValueError(
            "; ".join(
                f"{ENV}{''.join(f'[{part!r}]' for part in e['loc'])}: {e['msg']}"
                for e in exc.errors()
            )
        ) from None
    problems = [p for name, spec in specs.items() for p in _problems(name, spec)]
    if problems:
        raise ValueError("; ".join(problems))
    return specs


def _problems(name: str, spec: ProfileSpec) -> list[str]:
    where = f"{ENV}[{name!r}]"
    if name in RESERVED:
        return [f"{where}: the name {name!r} is reserved (set it with CTXC_SUMMARIZER*)"]
    if not _NAME.match(name):
        return [f"{where}: a name is letters, digits, '_', '.' and '-' (at most 64)"]
    problems = [
        f"{where}: kind {spec.kind} needs {field}"
        for field in NEEDS[spec.kind]
        if not getattr(spec, field)
    ]
    if spec.url is not None and not is_http_url(spec.url):
        problems.append(f"{where}: url must be an http(s) URL, not {spec.url!r}")
    return problems


def window_problem(name: str, window_tokens: int, max_tokens: int) -> str | None:
    """Why a profile's window cannot merge partial summaries, or None."""
    least = 3 * max_tokens + 1_024
    if window_tokens >= least:
        return None
    return (
        f"{ENV}[{name!r}]: window_tokens must be at least 3 x max_tokens + 1024 ({least}), so "
        "that partial summaries can be merged"
    )


def is_http_url(url: str) -> bool:
    """An http(s) URL with a host."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)
