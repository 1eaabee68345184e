"""Broker services: produce, consume, admin, janitor. Protocol-agnostic."""
