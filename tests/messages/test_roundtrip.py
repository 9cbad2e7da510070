"""Round trips through the codec, parametrized over codec x magic, and every decoder fed the
whole buffer, one byte at a time (each prefix), and with trailing bytes."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest
from _encoded import assert_same_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_pyspark._messages import (
    MESSAGE_SCHEMA,
    decode_message_set,
    encode_message,
    encode_message_set,
    encode_message_set_arrow,
    scan_boundaries,
)

CODECS = ["none", "gzip", "snappy"]
MAGICS = [0, 1]

values_strategy = st.lists(st.binary(max_size=300), max_size=40)


def decoded_values(data: bytes | bytearray | memoryview, base: int = 0) -> list[bytes]:
    values: list[bytes] = decode_message_set(data, base).batch.column("value").to_pylist()
    return values


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=values_strategy, base=st.integers(0, 1 << 40))
def test_round_trip(codec: str, magic: int, values: list[bytes], base: int) -> None:
    data = encode_message_set(values, compression=codec, magic=magic)
    result = decode_message_set(data, base)
    batch = result.batch
    assert batch.schema == MESSAGE_SCHEMA
    assert batch.column("value").to_pylist() == values
    assert result.next_offset == base + len(data)
    assert result.bytes_consumed == len(data)
    assert result.partial_size is None
    d = batch.to_pydict()
    if codec == "none":
        header = 10 if magic == 1 else 9
        offsets = [base]
        for v in values:
            offsets.append(offsets[-1] + header + len(v))
        assert d["offset"] == offsets[:-1]
        assert d["next_offset"] == offsets[1:]
        assert d["inner_index"] == [0] * len(values)
        assert result.message_count == len(values)
    else:
        assert d["offset"] == [base] * len(values)
        assert d["next_offset"] == [base + len(data)] * len(values)
        assert d["inner_index"] == list(range(len(values)))
        assert result.message_count == (1 if values else 0)
    assert d["compression"] == [codec] * len(values)


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_multi_megabyte(codec: str, magic: int) -> None:
    big = os.urandom(3 << 20)
    values = [b"", big, b"x" * 1000, big[:12345]]
    data = encode_message_set(values, compression=codec, magic=magic)
    assert decoded_values(data) == values


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS)
def test_arrow_encoder_matches_list_encoder(codec: str, magic: int) -> None:
    rnd = random.Random(3)
    values = [rnd.randbytes(rnd.randrange(0, 300)) for _ in range(57)]
    expected = encode_message_set(values, compression=codec, magic=magic)
    if codec == "gzip" or codec == "none" or codec == "snappy":
        arrays = [
            pa.array(values, pa.binary()),
            pa.array(values, pa.large_binary()),
            pa.array(values, pa.binary_view()),
            pa.array([b"junk", *values, b"more"], pa.binary()).slice(1, len(values)),
            pa.chunked_array([values[:20], values[20:]], pa.binary()),
        ]
        for array in arrays:
            got = encode_message_set(array, compression=codec, magic=magic)
            assert_same_sets([got], [expected], codec)
            assert encode_message_set_arrow(array, compression=codec, magic=magic) == got
    text = [v.hex() for v in values]
    as_bytes = encode_message_set([t.encode() for t in text], compression=codec, magic=magic)
    for kind in (pa.string(), pa.large_string()):
        got = encode_message_set(pa.array(text, kind), compression=codec, magic=magic)
        assert_same_sets([got], [as_bytes], codec)


def test_arrow_encoder_uniform_and_empty_values() -> None:
    for values in ([b""] * 5, [b"abc"] * 300, []):
        array = pa.array(values, pa.binary())
        assert encode_message_set_arrow(array) == encode_message_set(values)
        assert decoded_values(encode_message_set_arrow(array)) == values


def test_input_buffer_types() -> None:
    data = encode_message_set([b"a", b"bb", b"ccc"])
    big = bytearray(b"\xff" * 7 + data + b"\xee" * 5)
    for buf in (data, bytearray(data), memoryview(data), memoryview(big)[7 : 7 + len(data)]):
        assert decoded_values(buf) == [b"a", b"bb", b"ccc"]


# --- a log of several outer messages, fed in every way -----------------------------------------


def build_log(rnd: random.Random, count: int) -> tuple[bytes, list[int], list[list[bytes]]]:
    """A log of outer messages of every kind; returns it, the outer boundaries and the values
    each outer message holds."""
    outers: list[bytes] = []
    contents: list[list[bytes]] = []
    for _ in range(count):
        codec = rnd.choice(CODECS)
        magic = rnd.choice(MAGICS)
        if codec == "none":
            value = rnd.randbytes(rnd.choice([0, 1, 5, 40]))
            outers.append(encode_message(value, magic=magic))
            contents.append([value])
        else:
            values = [rnd.randbytes(rnd.randrange(0, 30)) for _ in range(rnd.randrange(1, 5))]
            outers.append(encode_message_set(values, compression=codec, magic=magic))
            contents.append(values)
    bounds = [0]
    for o in outers:
        bounds.append(bounds[-1] + len(o))
    return b"".join(outers), bounds, contents


@pytest.mark.parametrize("seed", [1, 2])
def test_every_prefix(seed: int) -> None:
    rnd = random.Random(seed)
    log, bounds, contents = build_log(rnd, 12)
    base = 4242
    for cut in range(len(log) + 1):
        result = decode_message_set(log[:cut], base)
        complete = max(i for i, b in enumerate(bounds) if b <= cut)
        assert result.message_count == complete
        assert result.next_offset == base + bounds[complete]
        assert result.batch.column("value").to_pylist() == [
            v for c in contents[:complete] for v in c
        ]
        left = cut - bounds[complete]
        if complete < len(bounds) - 1 and left >= 4:
            assert result.partial_size == bounds[complete + 1] - bounds[complete]
        else:
            assert result.partial_size is None
        starts, end = scan_boundaries(log[:cut], base)
        assert starts.tolist() == [base + b for b in bounds[:complete]]
        assert end == base + bounds[complete]


@pytest.mark.parametrize("seed", [3, 4])
def test_one_byte_at_a_time_stream(seed: int) -> None:
    """A consumer that gets one more byte each time and resumes from next_offset sees every
    value exactly once."""
    rnd = random.Random(seed)
    log, _, contents = build_log(rnd, 10)
    seen: list[bytes] = []
    offset = 0
    for available in range(len(log) + 1):
        result = decode_message_set(log[offset:available], offset)
        seen.extend(result.batch.column("value").to_pylist())
        offset = result.next_offset
    assert offset == len(log)
    assert seen == [v for c in contents for v in c]


@pytest.mark.parametrize("seed", [5, 6])
def test_trailing_bytes(seed: int) -> None:
    rnd = random.Random(seed)
    log, _, contents = build_log(rnd, 8)
    expected = [v for c in contents for v in c]
    for tail in (b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x20" + b"\xab" * 10, b"\x7f\xff"):
        result = decode_message_set(log + tail, 0)
        assert result.batch.column("value").to_pylist() == expected
        assert result.next_offset == len(log)
        assert result.partial_size == (36 if len(tail) >= 4 else None)


def test_equal_length_runs_and_breaks() -> None:
    """Long runs of equal lengths (checked in bulk) broken by other lengths."""
    rnd = random.Random(9)
    values: list[bytes] = []
    for _ in range(30):
        size = rnd.choice([0, 3, 200, 201])
        values += [rnd.randbytes(size) for _ in range(rnd.choice([1, 2, 7, 8, 9, 40, 300]))]
    data = encode_message_set(values)
    assert decoded_values(data) == values
    for cut in range(0, len(data), 997):
        result = decode_message_set(data[:cut])
        assert result.batch.column("value").to_pylist() == values[: result.message_count]
    inner = b"".join(encode_message_set(values[i : i + 200], compression="snappy")
                     for i in range(0, len(values), 200))
    assert decoded_values(inner) == values


def test_verify_crc_false_round_trip() -> None:
    values = [b"x" * 10] * 10
    data = encode_message_set(values, compression="gzip")
    assert decode_message_set(data, verify_crc=False).batch.column("value").to_pylist() == values
