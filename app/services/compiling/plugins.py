"""Compilers and decorators that operators install as Python packages (entry points)."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from app.domain.compilers.registry import BUILTINS, Registry

GROUP = "ctxc.compilers"
log = logging.getLogger("ctxc")


class PluginError(RuntimeError):
    """An entry point of the `ctxc.compilers` group that is not a Registry."""


def load_registry() -> Registry:
    """The built-in compilers plus every installed plug-in's (each entry point is a Registry)."""
    registry = BUILTINS
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        value = point.load()
        if not isinstance(value, Registry):
            raise PluginError(f"entry point {point.name!r} ({point.value}) is not a Registry")
        log.info(
            "loaded compiler plug-in %s: %s", point.name, sorted([*value.bases, *value.decorators])
        )
        registry = registry.merged(value)
    return registry
