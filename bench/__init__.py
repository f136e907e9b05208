"""Benchmarks: run on demand (`make bench`), print figures, never gate CI."""
