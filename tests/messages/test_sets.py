"""``encode_message_sets_arrow``: many message sets cut from one Arrow array in one call, each
byte for byte what ``encode_message_set_arrow`` gives for its slice."""

from __future__ import annotations

import itertools
import random
import zlib

import numpy as np
import pyarrow as pa
import pytest
from _encoded import assert_same_sets

from kafka_pyspark._messages import (
    decode_message_set,
    encode_message_set,
    encode_message_set_arrow,
    encode_message_sets_arrow,
)
from kafka_pyspark._messages.encode import GZIP_DEFAULT_LEVEL
from kafka_pyspark.errors import MessageError, SchemaError


def cut_points(rnd: random.Random, n: int) -> list[int]:
    points = sorted(rnd.randrange(0, n + 1) for _ in range(rnd.randrange(0, 12)))
    first = rnd.randrange(0, n + 1)
    return sorted([first, *points, n]) if rnd.random() < 0.5 else [0, *points, n]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
@pytest.mark.parametrize("seed", range(4))
def test_sets_match_one_set_per_slice(codec: str, magic: int, seed: int) -> None:
    rnd = random.Random(seed)
    uniform = seed % 2 == 0
    size = rnd.randrange(0, 300)
    values = [rnd.randbytes(size if uniform else rnd.randrange(0, 300)) for _ in range(250)]
    arrays = [
        pa.array(values, pa.binary()),
        pa.array(values, pa.large_binary()),
        pa.array(values, pa.binary_view()),
        pa.array([b"junk", *values, b"tail"], pa.binary()).slice(1, len(values)),
        pa.chunked_array([values[:90], values[90:]], pa.binary()),
    ]
    cuts = cut_points(rnd, len(values))
    expected = [
        encode_message_set(values[a:b], compression=codec, magic=magic)
        for a, b in itertools.pairwise(cuts)
    ]
    for array in arrays:
        got = encode_message_sets_arrow(array, cuts, compression=codec, magic=magic)
        assert_same_sets(got, expected, codec)
        assert got == [
            encode_message_set_arrow(array.slice(a, b - a), compression=codec, magic=magic)
            for a, b in itertools.pairwise(cuts)
        ]
    for data, (a, b) in zip(expected, itertools.pairwise(cuts), strict=True):
        assert decode_message_set(data).batch.column("value").to_pylist() == values[a:b]


def test_sets_of_strings_and_numpy_boundaries() -> None:
    text = [f"line {i} " * (i % 7) for i in range(100)]
    sets = encode_message_sets_arrow(pa.array(text, pa.string()), np.array([0, 40, 100]),
                                     compression="gzip")
    assert_same_sets(sets, [
        encode_message_set([t.encode() for t in text[:40]], compression="gzip"),
        encode_message_set([t.encode() for t in text[40:]], compression="gzip"),
    ], "gzip")
    assert encode_message_sets_arrow(pa.array(text, pa.large_string()), [100]) == []
    assert encode_message_sets_arrow(pa.array([], pa.binary()), [0, 0]) == [b""]


def test_sets_errors() -> None:
    array = pa.array([b"a", b"b", None, b"d"])
    with pytest.raises(MessageError) as info:
        encode_message_sets_arrow(array, [0, 4])
    assert "index 2" in str(info.value)
    assert encode_message_sets_arrow(array, [0, 2]) == [encode_message_set([b"a", b"b"])]
    with pytest.raises(MessageError) as info:
        encode_message_sets_arrow(array, [1, 3])
    assert "index 2" in str(info.value)
    for bad in ([2, 1], [0, 5], [-1, 2], [[0, 1]], []):
        with pytest.raises(ValueError):
            encode_message_sets_arrow(pa.array([b"x"] * 4), bad)  # type: ignore[arg-type]  # bad on purpose
    with pytest.raises(SchemaError):
        encode_message_sets_arrow(pa.array([1, 2]), [0, 2])



@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_crcs_out_holds_each_message_crc_in_row_order(codec: str, magic: int) -> None:
    rnd = random.Random(7)
    values = [rnd.randbytes(rnd.randrange(0, 300)) for _ in range(120)]
    array = pa.array([b"head", *values], pa.binary()).slice(1)
    crcs = np.full(110, 7, dtype=np.uint32)
    sets = encode_message_sets_arrow(array, [5, 50, 50, 115], compression=codec, magic=magic,
                                     crcs_out=crcs)
    assert crcs.tolist() == [zlib.crc32(v) for v in values[5:115]]
    assert sets == encode_message_sets_arrow(array, [5, 50, 50, 115], compression=codec,
                                             magic=magic)
    # the CRCs are those written in the (inner) messages: magic 1 header LENGTH MAGIC ATTR CRC
    inner = encode_message_set(values[5:50], magic=magic)
    crc_at = 6 if magic == 1 else 5
    first_crc = int.from_bytes(inner[crc_at : crc_at + 4], "big")
    assert first_crc == crcs[0]


def test_crcs_out_empty_and_bad() -> None:
    empty = np.zeros(0, dtype=np.uint32)
    assert encode_message_sets_arrow(pa.array([b"x", b""]), [1, 1], crcs_out=empty) == [b""]
    blank = np.zeros(2, dtype=np.uint32)
    encode_message_sets_arrow(pa.array([b"", b""]), [0, 2], crcs_out=blank)
    assert blank.tolist() == [0, 0]  # crc32 of nothing
    array = pa.array([b"a", b"b", b"c"])
    for bad in (np.zeros(2, np.uint32), np.zeros(3, np.int64), np.zeros((3, 1), np.uint32),
                [0, 0, 0]):
        with pytest.raises(ValueError, match="crcs_out"):
            encode_message_sets_arrow(array, [0, 3], crcs_out=bad)  # type: ignore[arg-type]  # bad on purpose


def test_gzip_level_keyword() -> None:
    values = [f'{{"user": {i}, "name": "n{i % 13}", "ok": true}}'.encode() for i in range(300)]
    array = pa.array(values)
    inner = encode_message_set(values)
    default = encode_message_sets_arrow(array, [0, 300], compression="gzip")
    assert default == encode_message_sets_arrow(array, [0, 300], compression="gzip",
                                                level=GZIP_DEFAULT_LEVEL)
    fast = encode_message_sets_arrow(array, [0, 300], compression="gzip", level=1)[0]
    stored = encode_message_sets_arrow(array, [0, 300], compression="gzip", level=0)[0]
    assert len(stored) > len(inner) > len(fast) > len(default[0])
    for data in (fast, stored):
        assert decode_message_set(data).batch.column("value").to_pylist() == values
    # level does not touch uncompressed or snappy sets
    for codec in ("none", "snappy"):
        assert encode_message_sets_arrow(array, [0, 300], compression=codec, level=1) == (
            encode_message_sets_arrow(array, [0, 300], compression=codec)
        )
    for bad in (-1, 10, True, 2.0, "6"):
        with pytest.raises(ValueError, match="level"):
            encode_message_sets_arrow(array, [0, 300], compression="gzip", level=bad)  # type: ignore[arg-type]  # bad on purpose
