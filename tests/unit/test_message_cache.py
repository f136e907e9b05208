"""The parse-and-count cache of stateless compiles remembers per tenant."""

from __future__ import annotations

from app.adapters.tokenizers import load_counter
from app.services.cache import MessageCache

HISTORY = [{"role": "user", "content": "the deploy key is in vault/prod/deploy"}]


def test_a_tenant_hits_what_it_sent_before_and_never_what_another_sent() -> None:
    cache = MessageCache(load_counter(), 1 << 20)
    [(first, _)] = cache.parse("tenant-a", "openai", HISTORY)
    [(again, _)] = cache.parse("tenant-a", "openai", HISTORY)
    [(other, _)] = cache.parse("tenant-b", "openai", HISTORY)
    assert again is first  # remembered: parsed and counted once
    assert other is not first and other == first  # parsed anew for the other tenant
