"""Hostile input: random and mutated buffers give a correct result or a typed MessageError
raised on purpose (no internal error escaping or behind it: ``tests/_fuzz.py``), never a hang."""

from __future__ import annotations

import itertools
import random
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np
from _fuzz import assert_deliberate, mutate, run, sample_log
from _kwargs import DecodeOptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_pyspark._messages import (
    MESSAGE_SCHEMA,
    decode_message_set,
    encode_message,
    scan_boundaries,
)
from kafka_pyspark.errors import MessageError

if TYPE_CHECKING:
    from typing import Unpack


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(data: bytes, base: int = 0, **kw: Unpack[DecodeOptions]) -> None:
    """Decode; a result must be self-consistent, an error must be a typed MessageError."""
    try:
        result = decode_message_set(data, base, **kw)
    except MessageError as e:
        assert_deliberate(e)
        assert e.offset is None or base <= e.offset <= base + len(data)
    else:
        assert result.batch.schema == MESSAGE_SCHEMA
        assert 0 <= result.bytes_consumed <= len(data)
        assert result.next_offset == base + result.bytes_consumed
        offsets = result.batch.column("offset").to_pylist()
        nexts = result.batch.column("next_offset").to_pylist()
        assert all(base <= o < n <= result.next_offset for o, n in zip(offsets, nexts, strict=True))
        assert offsets == sorted(offsets)
        if result.partial_size is not None:
            assert result.partial_size > len(data) - result.bytes_consumed
    run(lambda: scan_boundaries(data, base))


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    check(data)
    check(data, verify_crc=False)


@FUZZ
@given(seed=st.integers(0, 2**32), flips=st.integers(1, 4))
def test_mutated_logs(seed: int, flips: int) -> None:
    rnd = random.Random(seed)
    data = mutate(rnd, sample_log(rnd), flips)
    check(data, rnd.randrange(1 << 20))
    check(data, verify_crc=False, max_decompressed_size=rnd.randrange(0, 200))


@FUZZ
@given(seed=st.integers(0, 2**32))
def test_mutated_wrapper_contents(seed: int) -> None:
    """Corrupt the inner set, then wrap it with a valid CRC: decompression and the inner
    decoder face the garbage."""
    rnd = random.Random(seed)
    inner = bytearray(sample_log(rnd))
    for _ in range(rnd.randrange(1, 4)):
        inner[rnd.randrange(len(inner))] = rnd.randrange(256)
    codec = rnd.choice(["gzip", "snappy"])
    from kafka_pyspark._messages.compression import gzip_compress, snappy_compress

    payload = gzip_compress(bytes(inner)) if codec == "gzip" else snappy_compress(bytes(inner))
    if rnd.random() < 0.3:
        damaged = bytearray(payload)
        damaged[rnd.randrange(len(damaged))] ^= 0xFF
        payload = bytes(damaged)
    data = encode_message(payload, codec=codec)
    check(data)
    check(data, verify_crc=False)


def _encode_kernel() -> Any:
    from kafka_pyspark._messages import encode

    return encode._kernel


@FUZZ
@given(
    offsets=st.lists(st.integers(-3, 70), min_size=0, max_size=12),
    cuts=st.lists(st.integers(-2, 14), min_size=0, max_size=6),
    data=st.binary(max_size=64),
    magic=st.integers(-1, 2),
    codec=st.integers(-1, 3),
    level=st.integers(-1, 13),
    with_crcs=st.booleans(),
)
def test_encode_entry_point_on_any_arguments(
    offsets: list[int], cuts: list[int], data: bytes, magic: int, codec: int, level: int,
    with_crcs: bool,
) -> None:
    """The compiled encoder's C entry point on arguments encode.py would refuse: ValueError, or
    sets that decode to the rows they were given."""
    kernel = _encode_kernel()
    if kernel is None:
        return
    offs, at = np.array(offsets, np.int64), np.array(cuts, np.int64)
    rows = max(len(cuts) and cuts[-1] - cuts[0], 0)
    crcs = np.zeros(rows, np.uint32) if with_crcs else None
    try:
        out, ends = kernel.encode_sets(offs, data, at, magic, codec, level, crcs)
    except ValueError:
        return
    bounds = np.frombuffer(ends, np.int64).tolist()
    assert bounds[0] == 0 and bounds[-1] == len(out) and bounds == sorted(bounds)
    for j, (a, b) in enumerate(itertools.pairwise(bounds)):
        got = decode_message_set(out[a:b]).batch.column("value").to_pylist()
        lo, hi = cuts[j], cuts[j + 1]
        assert got == [data[offsets[i] : offsets[i + 1]] for i in range(lo, hi)]
    if crcs is not None:
        lo = cuts[0]
        want = [zlib.crc32(data[offsets[i] : offsets[i + 1]]) for i in range(lo, lo + rows)]
        assert crcs.tolist() == want
