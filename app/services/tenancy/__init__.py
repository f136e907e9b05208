"""Tenants' keys and their share of the CPU."""
