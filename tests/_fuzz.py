"""The one check of the fuzz tests: bad input may only end in a typed error raised on purpose.

A decoder that meets garbage must say what is wrong (a :class:`KafkaError` subclass naming
what and where). An internal error (``IndexError``, ``struct.error``, ``ValueError``,
``UnicodeDecodeError``, ...) escaping is a crash; one sitting anywhere in the
``__cause__``/``__context__`` chain of the typed error is a crash too, only re-labelled by a
catch-all, so the fuzzer must report it just the same. Used by ``tests/test_messages_fuzz.py``,
``tests/test_formats_fuzz.py`` and ``tests/reliability/test_fuzz_decoders.py`` (also inside its
atheris subprocess).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from kafka_pyspark.errors import KafkaError, MessageError

#: what parsing code raises on input it did not foresee (UnicodeDecodeError is a ValueError)
INTERNAL: tuple[type[BaseException], ...] = (
    IndexError, struct.error, ValueError, OverflowError, TypeError, KeyError, AttributeError,
    AssertionError, ArithmeticError, MemoryError,
)
#: the texts of catch-alls that re-label any exception (a chain cut with ``from None``)
CATCH_ALL_TEXTS = ("undecodable message set", "unreadable message set")

T = TypeVar("T")


def assert_deliberate(exc: BaseException, domain: type[KafkaError] = MessageError) -> None:
    """``exc`` is a ``domain`` error raised on purpose: no internal error in it or behind it."""
    assert isinstance(exc, domain), f"{type(exc).__name__} escaped: {exc!r}"
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        assert not isinstance(e, INTERNAL) or isinstance(e, KafkaError), (
            f"{type(exc).__name__} wraps an internal {type(e).__name__}: {e!r}"
        )
        assert not any(t in str(e) for t in CATCH_ALL_TEXTS), f"a catch-all answered: {e!r}"
        stack += [e.__cause__, e.__context__]


def run(fn: Callable[[], T], domain: type[KafkaError] = MessageError) -> T | None:
    """``fn()``, or ``None`` when it raised a deliberate ``domain`` error; anything else fails."""
    try:
        return fn()
    except Exception as e:
        assert_deliberate(e, domain)
        return None

