"""Loading the optional compiled kernels (``messages/_kernel.c``, ``formats/_v2kernel.c``).

Each kernel has a pure-Python twin giving the same results, so a kernel is used only when it
imports (``make setup`` and a wheel build compile it; a build without a C compiler leaves it
out), when it matches what its Python side expects (a stale build does not), and when the
environment variable :data:`PURE_ENV` is unset, empty or ``0`` (read once, at import).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType

PURE_ENV = "KAFKA_PYSPARK_PURE"


def pure_forced() -> bool:
    """Whether :data:`PURE_ENV` asks for the pure-Python paths."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def load_kernel(
    name: str, matches: Callable[[ModuleType], bool] = lambda _: True
) -> ModuleType | None:
    """The compiled module ``name`` (e.g. ``"kafka_pyspark.formats._v2kernel"``), or None
    when the pure path is forced, it does not import, or ``matches(module)`` is false."""
    if pure_forced():
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if matches(module) else None
