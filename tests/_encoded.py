"""Comparing encoded message sets across the two encoders (``_messages/encode.py``).

The compiled encoder (``_encode.c``) and the pure one write the same bytes for uncompressed and
snappy sets. gzip wrappers differ in their deflate body (libdeflate's, not zlib's), so those are
compared by what 0.7.2's rules decode from them, and by the shape of the wrapper.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka_pyspark._messages import decode_message_set
from kafka_pyspark._messages.compression import GZIP_HEADER
from kafka_pyspark._messages.layout import codec_id


def decoded(data: bytes | memoryview) -> dict[str, list[Any]]:
    """The messages of a set as 0.7.2 reads them (offsets left out: they count bytes)."""
    batch = decode_message_set(bytes(data)).batch
    return {k: batch.column(k).to_pylist() for k in ("value", "inner_index", "compression")}


def assert_same_sets(
    got: Sequence[bytes | memoryview], expected: Sequence[bytes | memoryview], codec: str | int
) -> None:
    """``got`` equals ``expected`` byte for byte; for gzip, set by set: both empty, or both a
    magic-1 gzip wrapper with Java's gzip header holding the same messages."""
    got_b, want_b = [bytes(g) for g in got], [bytes(e) for e in expected]
    if codec_id(codec) != 1 or got_b == want_b:
        assert got_b == want_b
        return
    assert len(got_b) == len(want_b)
    for g, e in zip(got_b, want_b, strict=True):
        assert (g == b"") == (e == b"")
        if g:
            assert g[4:6] == e[4:6] == b"\x01\x01"  # MAGIC 1, ATTRIBUTES gzip
            assert g[10:20] == e[10:20] == GZIP_HEADER
            assert decoded(g) == decoded(e)
