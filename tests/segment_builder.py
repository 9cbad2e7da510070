"""An independent builder of Kafka log bytes for tests, written from the layouts in
kafka_pyspark/_formats/batch_layout.py (docs/dev/PROTOCOL.md "Later on-disk formats")
with struct and the compression libraries directly; it never calls the code under test.

Everything returns ``bytes`` of whole entries: message-set entries (magic 0/1) and record
batches (magic 2), ready to concatenate into a ``.log`` file. The 0.7 messages of ``.kafka``
files and snappy-java's stream framing (shared with the 0.7 wrappers) come from ``_bytes``.
tests/conftest.py's ``logdir`` lays out a log directory of every format from them.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Sequence

import crc32c
import lz4.frame
import zstandard
from _bytes import message_set, snappy_java_stream

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4


# --- xxHash32 (reference, for KAFKA-3160's lz4 header checksum) ---------------------------

def _xxh32(data: bytes) -> int:
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 2**32 - 1

    def rot(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    i, n = 0, len(data)
    if n >= 16:
        acc = [(p1 + p2) & m, p2, 0, (-p1) & m]
        while i + 16 <= n:
            for k in range(4):
                (lane,) = struct.unpack_from("<I", data, i + 4 * k)
                acc[k] = rot((acc[k] + lane * p2) & m, 13) * p1 & m
            i += 16
        h = (rot(acc[0], 1) + rot(acc[1], 7) + rot(acc[2], 12) + rot(acc[3], 18)) & m
    else:
        h = p5
    h = (h + n) & m
    while i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = rot((h + lane * p3) & m, 17) * p4 & m
        i += 4
    for b in data[i:]:
        h = rot((h + b * p5) & m, 11) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


def lz4_frame(data: bytes, *, kafka_3160: bool = False) -> bytes:
    """An LZ4 frame without content size (as Kafka writes it); ``kafka_3160``: with the header
    checksum computed over the magic bytes too (pre-fix Kafka)."""
    frame = bytearray(lz4.frame.compress(data, store_size=False))
    assert frame[4] & 0x09 == 0  # no content size, no dict id: HC is byte 6
    if kafka_3160:
        frame[6] = (_xxh32(bytes(frame[0:6])) >> 8) & 0xFF
    return bytes(frame)


def compress(codec: int, data: bytes, *, kafka_3160: bool = False) -> bytes:
    if codec == GZIP:
        return gzip.compress(data, mtime=0)
    if codec == SNAPPY:
        return snappy_java_stream(data)
    if codec == LZ4:
        return lz4_frame(data, kafka_3160=kafka_3160)
    if codec == ZSTD:
        return zstandard.ZstdCompressor(write_content_size=False).compress(data)
    raise ValueError(codec)


# --- message sets v0/v1 ----------------------------------------------------------------------

def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def message(
    offset: int,
    value: bytes | None,
    *,
    key: bytes | None = None,
    magic: int = 0,
    codec: int = NONE,
    timestamp: int = -1,
    log_append: bool = False,
) -> bytes:
    """One message-set entry: OFFSET, SIZE, CRC32, MAGIC, ATTRIBUTES, [TIMESTAMP], key, value."""
    attributes = codec | (0x08 if log_append else 0)
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += _bytes(key) + _bytes(value)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def wrapper(
    offset: int,
    inner: Sequence[bytes],
    codec: int,
    *,
    magic: int = 0,
    timestamp: int = -1,
    log_append: bool = False,
    kafka_3160: bool = False,
) -> bytes:
    """A compressed wrapper message whose value is ``inner`` entries, compressed."""
    payload = compress(codec, b"".join(inner), kafka_3160=kafka_3160)
    return message(offset, payload, magic=magic, codec=codec, timestamp=timestamp,
                   log_append=log_append)


# --- record batches v2 -------------------------------------------------------------------------

def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    z &= 2**64 - 1
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _vbytes(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def record(
    offset_delta: int,
    value: bytes | None,
    *,
    key: bytes | None = None,
    timestamp_delta: int = 0,
    headers: Sequence[tuple[str | bytes, bytes | None]] = (),
) -> bytes:
    body = b"\x00" + varint(timestamp_delta) + varint(offset_delta) + _vbytes(key) + _vbytes(value)
    body += varint(len(headers))
    for hk, hv in headers:
        body += _vbytes(hk if isinstance(hk, bytes) else hk.encode()) + _vbytes(hv)
    return varint(len(body)) + body


def control_record(commit: bool, offset_delta: int = 0) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 7)  # version, coordinator epoch
    return record(offset_delta, value, key=key)


def batch(
    base_offset: int,
    records: Sequence[bytes],
    *,
    codec: int = NONE,
    last_offset_delta: int | None = None,
    base_timestamp: int = 1_700_000_000_000,
    max_timestamp: int | None = None,
    log_append: bool = False,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = 0,
) -> bytes:
    """One record batch (magic 2) with a correct CRC-32C."""
    raw = b"".join(records)
    data = raw if codec == NONE else compress(codec, raw)
    attributes = codec | (0x08 if log_append else 0) | (0x10 if transactional else 0)
    attributes |= 0x20 if control else 0
    lod = len(records) - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(
        ">hiqqqhii", attributes, lod, base_timestamp,
        base_timestamp if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records),
    ) + data
    crc = crc32c.crc32c(after_crc)
    tail = struct.pack(">ibI", leader_epoch, 2, crc) + after_crc
    return struct.pack(">qi", base_offset, len(tail)) + tail


# --- segment files (tests/conftest.py's logdir) ----------------------------------------------


def name(base: int, suffix: str = ".log") -> str:
    return f"{base:020d}{suffix}"


def v2_file(base: int, n: int, codec: int = 0, per_batch: int = 5) -> bytes:
    out = b""
    for b0 in range(base, base + n, per_batch):
        k = min(per_batch, base + n - b0)
        out += batch(b0, [record(i, f"v{b0 + i}".encode(), key=f"k{b0 + i}".encode())
                          for i in range(k)], codec=codec)
    return out


def k07(values: list[bytes]) -> bytes:
    return message_set(values)
