"""The broker's rules: pure functions and values, no I/O (what services apply)."""
