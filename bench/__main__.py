"""`python -m bench`: every benchmark, one after the other."""

from bench import append, compaction, compile, delta

for module in (append, compile, delta, compaction):
    module.run()
    print()
