"""Adapters that serve other queue protocols over the same broker services."""
