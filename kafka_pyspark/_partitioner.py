"""Key -> broker-partition routing, compatible with Kafka 0.7's Java ``DefaultPartitioner``.

Pure and vectorised (numpy over Arrow buffers); no sockets, no Spark.

0.7's producer keeps a list of every (broker id, partition) pair for a topic, sorted by broker id
and then partition (docs/dev/PROTOCOL.md "Partitioner"), and picks
``list[partition(key, len(list))]`` where ``DefaultPartitioner`` is::

    def partition(key: T, numPartitions: Int): Int = math.abs(key.hashCode) % numPartitions

and the producer then rejects any index outside ``[0, numPartitions)`` with
``InvalidPartitionException``.

String keys
    ``key.hashCode`` is Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over the
    string's UTF-16 code units (a character outside the BMP counts as its two surrogates), in
    int32 arithmetic that wraps on overflow.

Binary keys
    A Java ``byte[]`` has identity ``hashCode`` (a different value in every JVM), so no
    producer can be matched. We use ``java.util.Arrays.hashCode(byte[])`` - ``1*31^n + b[0]*31^(n-1)
    + ... + b[n-1]`` over *signed* bytes, int32 wrapping - which is what a Java partitioner that
    hashes the key's contents computes. To land where a Java producer with ``String`` keys would,
    pass the key as a string column.

``Math.abs`` corner
    Java's ``Math.abs(Integer.MIN_VALUE)`` is ``Integer.MIN_VALUE`` (negative), and Java's ``%``
    truncates toward zero, so a key whose hash is ``-2**31`` (for example the string
    ``"polygenelubricants"``) gets ``-(2**31 % n)``: partition 0 when ``n`` divides ``2**31``
    (a power of two), otherwise a negative index that 0.7's producer refuses. :func:`java_partition`
    returns exactly Java's value, negative included; callers must treat a negative result as
    "no partition" (the writer raises :class:`~kafka_pyspark.errors.InvalidPartitionError`, as
    0.7's producer throws), never as a Python negative index.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa

INT32_MIN = -(2**31)

_U32 = np.uint32
_pow31_cache: npt.NDArray[np.uint32] = np.ones(1, dtype=_U32)


# --- scalar references (readable; the vectorised code is tested against these) ----------------


def java_string_hashcode(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` (UTF-16 code units, int32 wrapping)."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_bytes_hashcode(b: bytes) -> int:
    """Java ``java.util.Arrays.hashCode(byte[])`` of ``b`` (signed bytes, int32 wrapping)."""
    h = 1
    for byte in b:
        h = (31 * h + (byte - 256 if byte >= 128 else byte)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(h: int) -> int:
    """Java ``Math.abs(int)``: ``abs(Integer.MIN_VALUE)`` stays ``Integer.MIN_VALUE``."""
    return h if h == INT32_MIN else abs(h)


def java_partition(h: int, num_partitions: int) -> int:
    """0.7 ``DefaultPartitioner``: ``Math.abs(h) % n`` with Java's truncating ``%``.

    Negative only for ``h == Integer.MIN_VALUE`` when ``n`` does not divide ``2**31``.
    """
    if num_partitions <= 0:
        raise ValueError(f"number of partitions must be positive, got {num_partitions}")
    a = java_abs(h)
    r = abs(a) % num_partitions
    return -r if a < 0 else r


# --- vectorised ----------------------------------------------------------------------------


def _pow31(n: int) -> npt.NDArray[np.uint32]:
    """``31**k mod 2**32`` for k in [0, n), cached and grown on demand."""
    global _pow31_cache
    if len(_pow31_cache) < n:
        size = max(n, 2 * len(_pow31_cache))
        factors = np.full(size, 31, dtype=_U32)
        factors[0] = 1
        _pow31_cache = np.cumprod(factors, dtype=_U32)  # wraps modulo 2**32
    return _pow31_cache[:n]


def _offsets_and_data(
    arr: pa.Array,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """Value offsets (length+1, rebased to 0) and the data bytes they index."""
    buffers = arr.buffers()
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    off_dtype = np.int64 if large else np.int32
    n = len(arr)
    if buffers[1] is None:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    raw = np.frombuffer(buffers[1], dtype=off_dtype, count=n + 1 + arr.offset)[arr.offset :]
    offsets: npt.NDArray[np.int64] = raw.astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    if buffers[2] is None or end == start:
        return offsets - start, np.zeros(0, dtype=np.uint8)
    data = np.frombuffer(buffers[2], dtype=np.uint8, count=end)[start:end]
    return offsets - start, data


def _polynomial(
    units: npt.NDArray[np.uint32], offsets: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint32]:
    """Per segment ``sum(units[p] * 31**(end-1-p)) mod 2**32`` (Horner's polynomial, in bulk).

    Every code unit is weighted by the power of 31 of its distance from its segment's end; a
    wrapping uint32 prefix sum then gives each segment's sum as a difference of two entries.
    """
    lengths = np.diff(offsets)
    n_rows = len(lengths)
    if len(units) == 0:
        return np.zeros(n_rows, dtype=_U32)
    max_len = int(lengths.max())
    seg_end = np.repeat(offsets[1:], lengths)
    exponent = seg_end - 1 - np.arange(len(units), dtype=np.int64)
    weighted = units * _pow31(max_len)[exponent]  # uint32 * uint32 wraps modulo 2**32
    prefix = np.empty(len(units) + 1, dtype=_U32)
    prefix[0] = 0
    np.cumsum(weighted, dtype=_U32, out=prefix[1:])
    out: npt.NDArray[np.uint32] = prefix[offsets[1:]] - prefix[offsets[:-1]]
    return out


def _flatten(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_string_view(t):
        arr = arr.cast(pa.large_string())
    elif pa.types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
    return arr


def java_hashcodes(arr: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int32]:
    """Java hash codes of every element: ``String.hashCode`` for string arrays,
    ``Arrays.hashCode(byte[])`` for binary arrays (see the module docstring).

    Null elements get 0 (callers route nulls by other rules: check ``arr.is_null()``).
    """
    arr = _flatten(arr)
    t = arr.type
    is_string = pa.types.is_string(t) or pa.types.is_large_string(t)
    if not (is_string or pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise TypeError(f"keys must be string or binary, not {t}")
    offsets, data = _offsets_and_data(arr)
    if is_string:
        hashes = _polynomial(data.astype(_U32), offsets)
        if len(data) and int(data.max()) >= 0x80:
            _fix_non_ascii(arr, offsets, data, hashes)
    else:
        units = data.astype(_U32)
        units[data >= 0x80] += _U32(0xFFFFFF00)  # sign-extend: byte b >= 128 means b - 256
        hashes = _polynomial(units, offsets)
        lengths = np.diff(offsets)
        if len(lengths):
            hashes += _pow31(int(lengths.max()) + 1)[lengths]  # the initial 1 times 31**n
    if arr.null_count:
        hashes[np.asarray(arr.is_null(), dtype=bool)] = 0
    result: npt.NDArray[np.int32] = hashes.view(np.int32)
    return result


def _fix_non_ascii(
    arr: pa.Array,
    offsets: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    hashes: npt.NDArray[np.uint32],
) -> None:
    """Recompute rows holding non-ASCII UTF-8 (their UTF-16 code units differ from the bytes)."""
    high = np.empty(len(data) + 1, dtype=np.int64)
    high[0] = 0
    np.cumsum(data >= 0x80, out=high[1:])
    rows = np.flatnonzero(high[offsets[1:]] - high[offsets[:-1]])
    for i in rows.tolist():
        s = bytes(data[offsets[i] : offsets[i + 1]]).decode("utf-8", "surrogatepass")
        units = np.frombuffer(s.encode("utf-16-be", "surrogatepass"), dtype=">u2")
        seg = np.array([0, len(units)], dtype=np.int64)
        hashes[i] = _polynomial(units.astype(_U32), seg)[0]


def java_partitions(
    hashes: npt.NDArray[np.int32], num_partitions: int
) -> npt.NDArray[np.int64]:
    """Vectorised :func:`java_partition` (negative where Java's result is negative)."""
    if num_partitions <= 0:
        raise ValueError(f"number of partitions must be positive, got {num_partitions}")
    h = hashes.astype(np.int64)
    a = np.abs(h)
    r = a % num_partitions
    out: npt.NDArray[np.int64] = np.where(h == INT32_MIN, -r, r)
    return out


def hash_partitions(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> npt.NDArray[np.int64]:
    """Index into the sorted broker-partition list for each key, exactly as 0.7's Java producer
    computes it (negative for the ``Math.abs(Integer.MIN_VALUE)`` corner; see the module doc)."""
    return java_partitions(java_hashcodes(keys), num_partitions)


def sorted_partitions(
    counts: Mapping[int, int], live: Container[int]
) -> list[tuple[int, int]]:
    """0.7's producer's list for a topic: every (broker id, partition) of a live broker, sorted
    by broker id then partition, from each broker's partition count (the one place it is built)."""
    return [(b, p) for b, n in sorted(counts.items()) if b in live for p in range(n)]


def random_partitions(
    num_rows: int, num_partitions: int, rng: np.random.Generator, block: int = 1
) -> npt.NDArray[np.int64]:
    """A uniformly random index per run of ``block`` consecutive rows."""
    if num_partitions <= 0:
        raise ValueError(f"number of partitions must be positive, got {num_partitions}")
    if num_rows == 0:
        return np.zeros(0, dtype=np.int64)
    blocks = -(-num_rows // block)
    picks = rng.integers(0, num_partitions, size=blocks, dtype=np.int64)
    out: npt.NDArray[np.int64] = np.repeat(picks, block)[:num_rows]
    return out


__all__ = [
    "INT32_MIN",
    "hash_partitions",
    "java_abs",
    "java_bytes_hashcode",
    "java_hashcodes",
    "java_partition",
    "java_partitions",
    "java_string_hashcode",
    "random_partitions",
    "sorted_partitions",
]
