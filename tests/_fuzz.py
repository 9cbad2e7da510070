"""The fuzz tests' shared parts: the one check (bad input may only end in a typed error raised
on purpose) and the generators of hostile 0.7 message sets.

A decoder that meets garbage must say what is wrong (a :class:`KafkaError` subclass naming
what and where). An internal error (``IndexError``, ``struct.error``, ``ValueError``,
``UnicodeDecodeError``, ...) escaping is a crash; one sitting anywhere in the
``__cause__``/``__context__`` chain of the typed error is a crash too, only re-labelled by a
catch-all, so the fuzzer must report it just the same. Used by
``tests/messages/test_messages_fuzz.py``, ``tests/formats/test_formats_fuzz.py`` and
``tests/reliability/test_fuzz_decoders.py`` (also inside its atheris subprocess).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import TypeVar

from _bytes import GZIP, SNAPPY, message

from kafka_pyspark._messages import compression as comp
from kafka_pyspark._messages import encode_message, encode_message_set
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



# --- hostile inputs ------------------------------------------------------------------------
# Random inputs, not golden vectors: built with the encoder (valid logs to start from), then
# damaged; only the outcome's shape is checked, never exact bytes.


def sample_log(rnd: random.Random, depth: int = 0) -> bytes:
    """A valid 0.7 log: plain messages (magic 0 or 1), compressed sets, wrappers of wrappers."""
    parts = []
    for _ in range(rnd.randrange(1, 5)):
        codec = rnd.choice(["none", "none", "gzip", "snappy"])
        values = [rnd.randbytes(rnd.randrange(0, 30)) for _ in range(rnd.randrange(1, 5))]
        magic = rnd.choice([0, 1])
        if codec == "none":
            parts.append(b"".join(encode_message(v, magic=magic) for v in values))
        elif depth < 2 and rnd.random() < 0.3:  # a wrapper of a wrapper
            inner = sample_log(rnd, depth + 1)
            payload = comp.gzip_compress(inner) if codec == "gzip" else comp.snappy_compress(inner)
            parts.append(encode_message(payload, codec=codec))
        else:
            parts.append(encode_message_set(values, compression=codec))
    return b"".join(parts)


#: int32 values that hurt as a LENGTH field
HOSTILE_LENGTHS = (-1, -4, 0, 4, 5, 6, 1 << 30, (1 << 31) - 1, -(1 << 31))


def mutate(rnd: random.Random, data: bytes, flips: int | None = None) -> bytes:
    """``data`` damaged at ``flips`` (default 1-4) random places: a flipped bit, a special byte,
    bytes cut or inserted, a hostile int32 written, or the tail cut off."""
    buf = bytearray(data)
    for _ in range(rnd.randrange(1, 5) if flips is None else flips):
        if not buf:
            break
        pos = rnd.randrange(len(buf))
        kind = rnd.randrange(6)
        if kind == 0:
            buf[pos] ^= 1 << rnd.randrange(8)
        elif kind == 1:
            buf[pos] = rnd.choice([0, 1, 2, 3, 0x7F, 0x80, 0xFF])
        elif kind == 2:
            del buf[pos : pos + rnd.randrange(1, 9)]
        elif kind == 3:
            buf[pos:pos] = rnd.randbytes(rnd.randrange(1, 9))
        elif kind == 4 and pos + 4 <= len(buf):
            struct.pack_into(">i", buf, pos, rnd.choice([*HOSTILE_LENGTHS, len(buf)]))
        else:
            del buf[pos:]
    return bytes(buf)


def rewrap(rnd: random.Random, inner: bytes) -> bytes:
    """``inner`` (garbage or not) in a wrapper with a valid CRC: the inner decoder faces it."""
    codec = rnd.choice([GZIP, SNAPPY])
    payload = comp.gzip_compress(inner) if codec == GZIP else comp.snappy_compress(inner)
    return message(payload, codec=codec)
