"""Tool payload compaction (seeds/002) and previews of oversized tool results: pure view
transforms whose originals stay retrievable."""
