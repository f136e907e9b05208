"""`python -m bench`: every benchmark, one after the other."""

from bench import (
    append,
    bodies,
    budget_fill,
    compaction,
    compaction_kit,
    compile,
    delta,
    events,
    load,
    proxy,
    redact,
    session_compile,
    session_read,
    summarising,
    tenancy,
    transfer,
)

for module in (
    append, bodies, compile, budget_fill, session_compile, session_read, delta, compaction,
    summarising, compaction_kit, events, redact, tenancy, transfer, load, proxy,
):  # fmt: skip
    module.run()
    print()
