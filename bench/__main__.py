"""`python -m bench`: every benchmark, one after the other."""

from bench import append, compile

for module in (append, compile):
    module.run()
    print()
