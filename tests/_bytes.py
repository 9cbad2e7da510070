"""The one hand-written Kafka 0.7 message builder of the test suite.

Written from the layouts of docs/dev/PROTOCOL.md ("Message layout (magic 0 and 1)" and
"Compression by nesting") with ``struct`` and ``zlib.crc32`` only, so tests never
depend on the encoder under test (``kafka_pyspark._messages.encode``)::

    LENGTH int32 (bytes after this field) | MAGIC int8 | ATTRIBUTES int8 (only if MAGIC != 0)
    | CHECKSUM uint32 (CRC32 of PAYLOAD) | PAYLOAD

A compressed message ("wrapper") is an ordinary message whose ATTRIBUTES name the codec and
whose PAYLOAD is whole inner messages, compressed: gzip (RFC 1952, the stdlib) or snappy in
snappy-java's stream framing (python-snappy for the raw blocks, the framing written here).
Golden vectors (literal hex) stay in the golden tests; this module is for building inputs.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterable

NONE, GZIP, SNAPPY = 0, 1, 2  # the codec in the low two bits of ATTRIBUTES
HEADER_V1 = 4 + 1 + 1 + 4  # LENGTH, MAGIC, ATTRIBUTES, CHECKSUM
HEADER_V0 = 4 + 1 + 4  # LENGTH, MAGIC, CHECKSUM
SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_JAVA_BLOCK = 32 * 1024  # snappy-java compresses its input in blocks of this size


def message(payload: bytes, *, magic: int = 1, codec: int = NONE, crc: int | None = None) -> bytes:
    """One message. ``codec`` is the whole ATTRIBUTES byte (written for every magic but 0, so
    an unknown magic gets the magic-1 layout); ``crc`` overrides the checksum (a corrupt one)."""
    checksum = zlib.crc32(payload) if crc is None else crc
    head = bytes([magic]) if magic == 0 else bytes([magic, codec])
    body = head + struct.pack(">I", checksum) + payload
    return struct.pack(">i", len(body)) + body


def message_set(payloads: Iterable[bytes], *, magic: int = 1) -> bytes:
    """Uncompressed messages back to back (a message set is nothing more)."""
    return b"".join(message(p, magic=magic) for p in payloads)


def gzip_wrapper(inner: bytes, *, mtime: int = 0) -> bytes:
    """A magic-1 gzip message whose payload is ``inner`` (whole messages), gzip-compressed."""
    return message(gzip.compress(inner, mtime=mtime), codec=GZIP)


def snappy_java_stream(data: bytes) -> bytes:
    """snappy-java's stream: magic, version 1, compatible version 1, then per 32 KiB block of
    ``data`` an int32 length and the raw snappy block."""
    import snappy

    out = [SNAPPY_JAVA_MAGIC + struct.pack(">ii", 1, 1)]
    for i in range(0, max(len(data), 1), SNAPPY_JAVA_BLOCK):
        block = snappy.compress(data[i : i + SNAPPY_JAVA_BLOCK])
        out.append(struct.pack(">i", len(block)) + block)
    return b"".join(out)


def snappy_wrapper(inner: bytes) -> bytes:
    """A magic-1 snappy message whose payload is ``inner`` in snappy-java's stream framing."""
    return message(snappy_java_stream(inner), codec=SNAPPY)
