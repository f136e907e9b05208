"""Summarisation compaction: when it is due, what it takes (API rounds), and whether it pays."""
