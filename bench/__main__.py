"""`python -m bench`: every benchmark, one after the other."""

from bench import append, compaction, compile, delta, events, redact, summarising, tenancy

for module in (append, compile, delta, compaction, summarising, events, redact, tenancy):
    module.run()
    print()
