"""On Lambda, what a function's process holds after the first request of each kind is kept
out of the garbage collector's passes.

A Lambda process serves one function for its lifetime: its imports, its AWS clients with
their service models and the broker's caches (~200k objects) live as long as it does, and
the cyclic collector walked them again in each full pass: ~25 % of the handlers' CPU time
at batch 1,000, ~6 % with them frozen (``gc.freeze``; docs/deploy.md, lever 8). Reference
counting still frees a frozen object; only cycles among frozen objects stay. The local
stack runs every function in one process and unloads their code with each stack, so
nothing is frozen there: only a process the Lambda runtime started (``AWS_EXECUTION_ENV``)
freezes.
"""

from __future__ import annotations

import functools
import gc
import os

LAMBDA_EXECUTION_ENV_PREFIX = "AWS_Lambda_"
"""How the Lambda runtime names itself in ``AWS_EXECUTION_ENV`` (``AWS_Lambda_python3.11``)."""


def settle_after_request(kind: str) -> None:
    """After a request of ``kind``: on Lambda, the first of its kind in the process
    collects its young garbage, then freezes (a route makes its own clients and caches on
    first use)."""
    if os.environ.get("AWS_EXECUTION_ENV", "").startswith(LAMBDA_EXECUTION_ENV_PREFIX):
        _freeze_once(kind)


@functools.lru_cache(maxsize=128)  # the API's request kinds, with room to spare
def _freeze_once(kind: str) -> None:
    # The young generations only: the request's own garbage is freed, not frozen, without
    # a full pass over the whole heap (~100 ms of CPU on the first request). Older cyclic
    # garbage from the imports (~500 objects, ~40 KB) is frozen with the rest, once.
    gc.collect(1)
    gc.freeze()
