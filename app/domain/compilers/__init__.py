"""Compilers: from a session snapshot to the exact view one model call receives (seeds/000)."""
