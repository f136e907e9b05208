"""`python -m bench`: every benchmark, one after the other."""

from bench import append, compile, delta

for module in (append, compile, delta):
    module.run()
    print()
