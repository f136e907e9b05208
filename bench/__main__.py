"""`python -m bench`: every benchmark, one after the other."""

from bench import append

for module in (append,):
    module.run()
    print()
