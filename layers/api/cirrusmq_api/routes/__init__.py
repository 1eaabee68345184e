"""Routers by permission boundary: admin (topics, groups, meta), produce, consume."""
