"""The Java-compatible partitioner: hand-known hash codes, a pure reference loop, the
Math.abs(Integer.MIN_VALUE) corner, and the vectorised paths against the reference."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_pyspark._partitioner import (
    INT32_MIN,
    hash_partitions,
    java_abs,
    java_bytes_hashcode,
    java_hashcodes,
    java_partition,
    java_partitions,
    java_string_hashcode,
    random_partitions,
    sorted_partitions,
)


def ref_string_hash(s: str) -> int:
    """Independent reference: Java's loop over UTF-16 code units, h = 31*h + c, int32 wrap."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:  # a supplementary character is two surrogate code units in Java
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def ref_bytes_hash(b: bytes) -> int:
    """Arrays.hashCode(byte[]): result = 1; result = 31*result + (signed byte)."""
    h = 1
    for x in b:
        signed = x - 256 if x > 127 else x
        h = (h * 31 + signed) % 2**32
    return h - 2**32 if h >= 2**31 else h


def ref_java_mod(a: int, n: int) -> int:
    """Java's % truncates toward zero."""
    q = abs(a) // n
    return a - n * q if a >= 0 else a + n * q


# Values from the JDK (String.hashCode is specified; these are well-known results).
KNOWN = [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("Hello", 69609650),
    ("abc", 96354),
    ("polygenelubricants", INT32_MIN),  # the classic Math.abs(hashCode) trap
    ("GydZG_", INT32_MIN),
    ("DESIGNING WORKHOUSES", INT32_MIN),
    ("Aa", 2112),
    ("BB", 2112),  # the classic collision
    ("hello world", 1794106052),
]


@pytest.mark.parametrize(("text", "expected"), KNOWN)
def test_known_string_hashcodes(text: str, expected: int) -> None:
    assert ref_string_hash(text) == expected
    assert java_string_hashcode(text) == expected
    assert java_hashcodes(pa.array([text])).tolist() == [expected]


def test_known_bytes_hashcodes() -> None:
    # Arrays.hashCode(new byte[0]) == 1; {1,2,3} == 30817; {-1} == 30; {-128, 127} == -2880
    cases = [(b"", 1), (b"\x01\x02\x03", 30817), (b"\xff", 30), (b"\x80\x7f", -2880)]
    for data, expected in cases:
        assert ref_bytes_hash(data) == expected
        assert java_bytes_hashcode(data) == expected
        assert java_hashcodes(pa.array([data], pa.binary())).tolist() == [expected]


def test_math_abs_corner() -> None:
    assert java_abs(INT32_MIN) == INT32_MIN
    assert java_abs(-5) == 5
    # Java: Math.abs(MIN_VALUE) % n is -(2**31 % n): 0 for powers of two, negative otherwise
    for n in range(1, 40):
        expected = ref_java_mod(INT32_MIN, n)
        assert java_partition(INT32_MIN, n) == expected
        assert (expected == 0) == (2**31 % n == 0)
    assert java_partition(INT32_MIN, 3) == -2
    assert java_partition(INT32_MIN, 4) == 0
    keys = pa.array(["polygenelubricants", "hello"])
    assert hash_partitions(keys, 3).tolist() == [-2, 99162322 % 3]
    assert hash_partitions(keys, 8).tolist() == [0, 99162322 % 8]


def test_partition_of_negative_hashes() -> None:
    h = java_string_hashcode("hello world!")  # any negative hash
    assert h < 0
    for n in (1, 2, 3, 5, 7, 13):
        assert java_partition(h, n) == abs(h) % n
    arr = np.array([h, INT32_MIN, 0, 2**31 - 1], dtype=np.int32)
    assert java_partitions(arr, 7).tolist() == [abs(h) % 7, ref_java_mod(INT32_MIN, 7), 0,
                                                (2**31 - 1) % 7]


def test_vectorised_mixed_batch_against_reference() -> None:
    texts = [
        "", "a", "key-1", "héllo", "日本語", "😀", "a😀b", "x" * 5000, None, "polygenelubricants",
        "mixed ascii and ünïcödé", "\u0000", "\uffff",
    ]
    arr = pa.array(texts)
    expected = [0 if t is None else ref_string_hash(t) for t in texts]
    assert java_hashcodes(arr).tolist() == expected
    assert java_hashcodes(arr.cast(pa.large_string())).tolist() == expected
    # sliced arrays (non-zero offset) and chunked arrays
    assert java_hashcodes(arr.slice(3, 5)).tolist() == expected[3:8]
    chunked = pa.chunked_array([arr.slice(0, 4), arr.slice(4)])
    assert java_hashcodes(chunked).tolist() == expected


def test_vectorised_binary_against_reference() -> None:
    data = [b"", b"\x00", b"\xff\xfe\x80", bytes(range(256)), None, b"k" * 3000]
    arr = pa.array(data, pa.binary())
    expected = [0 if d is None else ref_bytes_hash(d) for d in data]
    assert java_hashcodes(arr).tolist() == expected
    assert java_hashcodes(arr.cast(pa.large_binary())).tolist() == expected
    assert java_hashcodes(arr.slice(2)).tolist() == expected[2:]


def test_empty_and_all_null() -> None:
    assert java_hashcodes(pa.array([], pa.string())).tolist() == []
    assert java_hashcodes(pa.array([None, None], pa.string())).tolist() == [0, 0]
    assert java_hashcodes(pa.array(["", ""])).tolist() == [0, 0]


def test_rejects_other_types() -> None:
    with pytest.raises(TypeError):
        java_hashcodes(pa.array([1, 2]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=30))
def test_strings_property(texts: list[str]) -> None:
    expected = [ref_string_hash(t) for t in texts]
    assert java_hashcodes(pa.array(texts, pa.string())).tolist() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(1, 50))
def test_bytes_property(data: list[bytes], n: int) -> None:
    expected = [ref_bytes_hash(d) for d in data]
    arr = pa.array(data, pa.binary())
    assert java_hashcodes(arr).tolist() == expected
    assert hash_partitions(arr, n).tolist() == [ref_java_mod(abs(h), n) for h in expected]


def test_random_partitions_blocks() -> None:
    rng = np.random.default_rng(7)
    picks = random_partitions(1000, 5, rng, block=200)
    assert len(picks) == 1000
    assert picks.min() >= 0 and picks.max() < 5
    for start in range(0, 1000, 200):
        assert len(set(picks[start : start + 200].tolist())) == 1
    assert len(random_partitions(0, 5, rng)) == 0
    with pytest.raises(ValueError):
        random_partitions(3, 0, rng)


def test_sorted_partitions_is_the_producers_list() -> None:
    # by broker id, then partition; brokers not live are left out
    counts = {5: 3, 0: 1, 2: 2}
    assert sorted_partitions(counts, {0, 2}) == [(0, 0), (2, 0), (2, 1)]
    assert sorted_partitions(counts, {0, 2, 5}) == [(0, 0), (2, 0), (2, 1), (5, 0), (5, 1), (5, 2)]
    assert sorted_partitions({}, {1}) == []
