"""`python -m bench`: every benchmark, one after the other."""

from bench import append, bodies, compaction, compile, delta, events, redact, summarising, tenancy

for module in (append, bodies, compile, delta, compaction, summarising, events, redact, tenancy):
    module.run()
    print()
