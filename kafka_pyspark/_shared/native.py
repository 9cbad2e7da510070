"""Loading the optional compiled kernels (``_messages/_kernel.c``, ``_formats/_v2kernel.c``).

Each kernel has a pure-Python twin giving the same results, so a kernel is used only when it
imports (``make setup`` and a wheel build compile it; a build without a C compiler leaves it
out), when it matches what its Python side expects (a stale build does not), and when the
environment variable :data:`PURE_ENV` is unset, empty or ``0`` (read once, at import).

A kernel that repeats constants of its Python side (a layout, status codes) exports them; one
whose values differ is not used, and :class:`KernelMismatchWarning` names each difference: the
pure path gives the right answers, a drifted kernel might not.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType

PURE_ENV = "KAFKA_PYSPARK_PURE"


def pure_forced() -> bool:
    """Whether :data:`PURE_ENV` asks for the pure-Python paths."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


class KernelMismatchWarning(RuntimeWarning):
    """A compiled kernel disagrees with its Python side and is not used."""


def kernel_mismatches(module: ModuleType, constants: Mapping[str, int]) -> list[str]:
    """Each constant of ``constants`` that ``module`` exports with another value (or not at
    all), as ``"NAME is 5, not 4"``."""
    out = []
    for key, want in constants.items():
        got = getattr(module, key, None)
        if got != want:
            out.append(f"{key} is {'missing' if got is None else got}, not {want}")
    return out


def load_kernel(
    name: str,
    matches: Callable[[ModuleType], bool] = lambda _: True,
    constants: Mapping[str, int] | None = None,
) -> ModuleType | None:
    """The compiled module ``name`` (e.g. ``"kafka_pyspark._formats._v2kernel"``), or None
    when the pure path is forced, it does not import, ``matches(module)`` is false, or it
    exports one of ``constants`` with another value (then with a
    :class:`KernelMismatchWarning` naming every difference)."""
    if pure_forced():
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    wrong = kernel_mismatches(module, constants or {})
    if wrong:
        warnings.warn(
            f"{name} is not used (the pure-Python path is): it disagrees with its Python side: "
            f"{'; '.join(wrong)}. Rebuild it (make setup)",
            KernelMismatchWarning,
            stacklevel=2,
        )
        return None
    return module if matches(module) else None
