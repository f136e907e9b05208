"""`python -m bench`: every benchmark, one after the other."""

from bench import (
    append,
    bodies,
    budget_fill,
    bulk,
    compaction,
    compaction_kit,
    compaction_latency,
    compile,
    delta,
    events,
    load,
    prefix_cache,
    proxy,
    redact,
    session_compile,
    session_read,
    storage,
    summarising,
    tenancy,
    transfer,
)

for module in (
    append,
    storage,
    bodies,
    compile,
    budget_fill,
    session_compile,
    bulk,
    session_read,
    delta,
    compaction,
    summarising,
    compaction_kit,
    prefix_cache,
    compaction_latency,
    events,
    redact,
    tenancy,
    transfer,
    load,
    proxy,
):
    module.run()
    print()
