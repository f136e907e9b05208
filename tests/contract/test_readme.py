"""The configuration page's table says what the settings class does."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def configuration_rows() -> dict[str, str]:
    section = CONFIGURATION.read_text().split("# Configuration", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `CTXC_")]
    return {name.strip(" `"): default.strip(" `") for name, default in rows}


def shown(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_every_setting_is_on_the_configuration_page_with_its_default() -> None:
    rows = configuration_rows()
    expected = {
        f"CTXC_{name.upper()}": shown(f.default) for name, f in Settings.model_fields.items()
    }
    assert rows == expected
