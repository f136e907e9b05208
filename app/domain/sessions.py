"""Session-level values: ids and system prompt fragments."""

from __future__ import annotations

import re
from typing import Literal, NewType

from pydantic import BaseModel, ConfigDict, Field

TenantId = NewType("TenantId", str)
SessionPk = NewType("SessionPk", str)

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
SECTION_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$"


class PromptFragment(BaseModel):
    """A named piece of the system prompt; `static` is sent once per provider session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    text: str
    lifecycle: Literal["static", "dynamic"] = "static"
