"""The decoder's walk from message to message: the vectorised walk over many small messages of
varied sizes (``decode._speculate``) must find exactly what the Python loop finds, on valid,
corrupt, truncated and zero-heavy input."""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from kafka_pyspark.errors import MessageError
from kafka_pyspark.messages import decode as dec
from kafka_pyspark.messages import decode_message_set, encode_message_set, scan_boundaries


def message(payload: bytes, magic: int = 1, attributes: int = 0) -> bytes:
    if magic == 0:
        return struct.pack(">iBI", 5 + len(payload), 0, zlib.crc32(payload)) + payload
    return struct.pack(">iBBI", 6 + len(payload), 1, attributes, zlib.crc32(payload)) + payload


def text_payload(rnd: random.Random, size: int) -> bytes:
    return bytes(rnd.choices(b"abcdefghijklmnopqrstuvwxyz {}:,0123456789", k=size))


def binary_payload(rnd: random.Random, size: int, zeros: float) -> bytes:
    return bytes(0 if rnd.random() < zeros else b for b in rnd.choices(range(1, 256), k=size))


def random_set(rnd: random.Random) -> bytes:
    kind = rnd.choice(["text", "binary", "zeros", "mixed"])
    parts = []
    total = 0
    target = rnd.choice([40_000, 70_000, 120_000, 300_000])
    while total < target:
        size = rnd.choice([rnd.randrange(0, 40), rnd.randrange(40, 400)])
        if kind == "text":
            payload = text_payload(rnd, size)
        elif kind == "binary":
            payload = binary_payload(rnd, size, 0.0)
        elif kind == "zeros":
            payload = binary_payload(rnd, size, 0.5)
        else:
            payload = text_payload(rnd, size) if rnd.random() < 0.9 else bytes(size)
        magic = 0 if rnd.random() < 0.1 else 1
        parts.append(message(payload, magic))
        total += len(parts[-1])
    return b"".join(parts)


def corrupt(rnd: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    action = rnd.choice(["none", "flip", "length", "truncate", "garbage", "huge"])
    starts, _ = scan_boundaries(data)
    at = int(rnd.choice(starts))
    if action == "flip":
        for _ in range(rnd.randrange(1, 4)):
            buf[rnd.randrange(len(buf))] ^= 1 << rnd.randrange(8)
    elif action == "length":
        struct.pack_into(">i", buf, at, rnd.choice([-1, 0, 2, 4, 5, 6, 7, 1 << 30, (1 << 30) + 1]))
    elif action == "truncate":
        del buf[rnd.randrange(len(buf) // 2, len(buf)) :]
    elif action == "garbage":
        buf[at : at + 12] = rnd.randbytes(12)
    elif action == "huge":  # LENGTH past 16 MiB: not a candidate of the vectorised walk
        struct.pack_into(">i", buf, at, (20 << 20))
    return bytes(buf)


def walk_both(data: bytes, stop: int | None = None, check: bool = True) -> None:
    mv = memoryview(data)
    end = len(mv)
    limit = end if stop is None else stop
    fast = dec._walk(mv, 0, end, limit, check)
    saved = dec._SPEC_TRIES
    dec._SPEC_TRIES = 0
    try:
        slow = dec._walk(mv, 0, end, limit, check)
    finally:
        dec._SPEC_TRIES = saved
    assert fast[0].tolist() == slow[0].tolist()
    assert fast[1:] == slow[1:]


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_walk_matches_python_loop(seed: int) -> None:
    rnd = random.Random(seed)
    data = corrupt(rnd, random_set(rnd))
    walk_both(data)
    walk_both(data, check=False)
    walk_both(data, stop=rnd.randrange(len(data) + 1))


def test_vectorised_walk_is_used_and_decodes() -> None:
    rnd = random.Random(5)
    values = [text_payload(rnd, rnd.randrange(100, 300)) for _ in range(3000)]
    data = encode_message_set(values)
    mv = memoryview(data)
    assert dec._speculate(mv, 0, len(mv), len(mv)) is not None
    result = decode_message_set(data, 77)
    assert result.batch.column("value").to_pylist() == values
    assert result.next_offset == 77 + len(data)
    # cut anywhere: the same values as a decode of the prefix by the Python loop
    for cut in (len(data) - 1, len(data) - 150, 70_001, 65_536):
        part = decode_message_set(data[:cut])
        starts, end = scan_boundaries(data[:cut])
        assert part.next_offset == end
        assert part.batch.column("value").to_pylist() == values[: len(starts)]
        assert part.partial_size is not None


def test_vectorised_walk_errors_match() -> None:
    rnd = random.Random(9)
    values = [text_payload(rnd, rnd.randrange(100, 300)) for _ in range(1000)]
    data = bytearray(encode_message_set(values))
    starts, _ = scan_boundaries(bytes(data))
    struct.pack_into(">i", data, int(starts[700]), 3)  # LENGTH below the minimum
    with pytest.raises(MessageError) as fast:
        decode_message_set(bytes(data), 10)
    saved = dec._SPEC_TRIES
    dec._SPEC_TRIES = 0
    try:
        with pytest.raises(MessageError) as slow:
            decode_message_set(bytes(data), 10)
    finally:
        dec._SPEC_TRIES = saved
    assert type(fast.value) is type(slow.value)
    assert fast.value.offset == slow.value.offset == 10 + int(starts[700])


@pytest.mark.parametrize("magic", [0, 1])
def test_vectorised_walk_sees_through_empty_messages(magic: int) -> None:
    # an empty message's header is mostly zero bytes (CRC32 of nothing is 0): candidates
    # closer together than a message, up to the next start
    rnd = random.Random(magic)
    values = [b"" if rnd.random() < 0.1 else text_payload(rnd, rnd.randrange(0, 300))
              for _ in range(2000)]
    data = encode_message_set(values, magic=magic)
    starts, _ = scan_boundaries(data)
    found = dec._speculate(memoryview(data), 0, len(data), len(data))
    assert found is not None
    assert found.tolist() == starts.tolist()
    walk_both(data)
    assert decode_message_set(data).batch.column("value").to_pylist() == values
