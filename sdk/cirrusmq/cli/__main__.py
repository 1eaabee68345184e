"""``python -m cirrusmq.cli``: the ``cirrusmq`` command line."""

from __future__ import annotations

from . import main

main()
