"""`python -m bench`: every benchmark, one after the other."""

from bench import append, compaction, compile, delta, events

for module in (append, compile, delta, compaction, events):
    module.run()
    print()
