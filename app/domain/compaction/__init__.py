"""Compaction: what shrinks the view (tool payloads, oversized results) and why."""
