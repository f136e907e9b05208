"""The `ctxc` command line's parts: what its database commands share, export and import."""
