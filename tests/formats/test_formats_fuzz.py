"""Damaged later-format bytes (kafka_pyspark._formats): every flipped, cut or inserted byte
either still decodes or raises a typed MessageError naming a position inside the buffer, raised
on purpose (no internal error escaping or behind it: ``tests/_fuzz.py``), never a hang or a row
from outside the data."""

from __future__ import annotations

import random

import pytest
from _fuzz import assert_deliberate, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segment_builder import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    batch,
    control_record,
    message,
    record,
    wrapper,
)

from kafka_pyspark._formats import decode_log, scan_log
from kafka_pyspark.errors import MessageError

SAMPLE = b"".join([
    message(0, b"m0", key=b"k"),
    wrapper(2, [message(1, b"g1"), message(2, b"g2")], GZIP),
    wrapper(4, [message(0, b"l3", magic=1, timestamp=7), message(1, b"l4", magic=1,
                                                               timestamp=8)], LZ4, magic=1),
    batch(5, [record(i, bytes([i]) * (i * 13 % 40), key=b"k" if i % 2 else None,
                     headers=[("h", b"v")] if i == 3 else ()) for i in range(12)]),
    batch(17, [record(0, b"s"), record(1, None)], codec=SNAPPY),
    batch(19, [record(0, b"z" * 50)], codec=ZSTD, transactional=True, producer_id=4),
    batch(20, [control_record(False)], control=True, transactional=True, producer_id=4),
    batch(21, [record(0, b"n")], codec=NONE),
])


def check(data: bytes, verify: bool) -> None:
    try:
        chunk = decode_log(data, base_position=1000, verify_crc=verify)
    except MessageError as e:
        assert_deliberate(e)
        assert e.offset is not None and 1000 <= e.offset <= 1000 + len(data), e
        return
    assert chunk.bytes_consumed <= len(data)
    run(lambda: scan_log(data))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_bytes_fail_cleanly(data: st.DataObject) -> None:
    buf = bytearray(SAMPLE)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        op = data.draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if op == "flip":
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set":
            buf[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del buf[i:i + data.draw(st.integers(1, 8))]
        else:
            buf[i:i] = bytes([data.draw(st.integers(0, 255))])
    check(bytes(buf), verify=data.draw(st.booleans()))


@pytest.mark.parametrize("seed", range(3))
def test_random_garbage_after_valid_entries(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        check(SAMPLE[: rng.randrange(len(SAMPLE))] + rng.randbytes(rng.randrange(1, 80)),
              verify=False)
