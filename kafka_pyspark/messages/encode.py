"""Messages and message sets -> bytes, as Kafka 0.7.2's producer writes them.

Layout: :mod:`kafka_pyspark.messages.layout`; codecs: :mod:`kafka_pyspark.messages.compression`.
A compressed set is ONE magic-1 wrapper message whose payload is the compressed concatenation of
the real messages (seed 003): offsets then address the wrapper, never the inner messages.

The Arrow path (:func:`encode_message_set_arrow`) reads the value array's offsets and data
buffers directly: one ``zlib.crc32`` per message over a memoryview slice (a CRC per message is
what the format needs, and the C call is the cheapest way to get it), headers packed in C
through ``map``, and one ``b"".join`` that copies every payload once.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_pyspark.errors import (
    MessageError,
    MessageTooLargeError,
    SchemaError,
    UnknownCodecError,
    UnknownMagicError,
)
from kafka_pyspark.messages import compression
from kafka_pyspark.messages.crc import crc32
from kafka_pyspark.messages.layout import (
    CODEC_GZIP,
    CODEC_NONE,
    CODEC_SNAPPY,
    HEADER_V0,
    HEADER_V0_SIZE,
    HEADER_V1,
    HEADER_V1_SIZE,
    MAX_MESSAGE_LENGTH,
    MIN_LENGTH_V0,
    MIN_LENGTH_V1,
    codec_id,
)

_OVERHEAD = {0: MIN_LENGTH_V0, 1: MIN_LENGTH_V1}  # LENGTH - payload size, per magic
_MAX_PAYLOAD = {m: MAX_MESSAGE_LENGTH - o for m, o in _OVERHEAD.items()}
_HEADER_SIZE = {0: HEADER_V0_SIZE, 1: HEADER_V1_SIZE}


def _check_magic(magic: int) -> None:
    if magic not in (0, 1) or isinstance(magic, bool):
        raise UnknownMagicError(f"cannot encode MAGIC {magic!r} (0 or 1)")


def _too_large(size: int, what: str = "message payload") -> MessageTooLargeError:
    return MessageTooLargeError(
        f"{what} of {size} bytes exceeds the {MAX_MESSAGE_LENGTH}-byte message bound"
    )


def encode_message(
    payload: bytes | bytearray | memoryview, *, magic: int = 1, codec: int | str = 0
) -> bytes:
    """One message: LENGTH, MAGIC, [ATTRIBUTES], CRC32 of ``payload``, ``payload``.

    ``codec`` only sets the ATTRIBUTES bits (the caller passes an already compressed payload
    for a wrapper). Magic 0 has no ATTRIBUTES byte, so it can only carry codec 0.
    """
    _check_magic(magic)
    cid = codec_id(codec)
    size = len(memoryview(payload).cast("B"))
    if size > _MAX_PAYLOAD[magic]:
        raise _too_large(size)
    if magic == 1:
        return HEADER_V1.pack(size + MIN_LENGTH_V1, 1, cid, zlib.crc32(payload)) + bytes(payload)
    if cid != CODEC_NONE:
        raise UnknownCodecError(
            f"a magic-0 message has no ATTRIBUTES byte, so it cannot carry codec {cid}"
        )
    return HEADER_V0.pack(size + MIN_LENGTH_V0, 0, zlib.crc32(payload)) + bytes(payload)


def _wrap(inner: bytes, cid: int) -> bytes:
    if not inner or cid == CODEC_NONE:
        return inner
    if cid == CODEC_GZIP:
        payload = compression.gzip_compress(inner)
    elif cid == CODEC_SNAPPY:
        payload = compression.snappy_compress(inner)
    else:  # pragma: no cover - codec_id only returns known ids
        raise UnknownCodecError(f"unknown compression codec {cid}")
    if len(payload) > _MAX_PAYLOAD[1]:
        raise _too_large(len(payload), "compressed wrapper payload")
    return HEADER_V1.pack(len(payload) + MIN_LENGTH_V1, 1, cid, crc32(payload)) + payload


def encode_message_set(
    values: Iterable[bytes | bytearray | memoryview | str] | pa.Array | pa.ChunkedArray,
    *,
    compression: str | int = "none",
    magic: int = 1,
) -> bytes:
    """A message set holding ``values`` in order.

    ``values``: bytes-like (``str`` is encoded as UTF-8), or a pyarrow binary/string array.
    ``compression`` none: the messages back to back; gzip/snappy (or 1/2): ONE magic-1 wrapper
    whose payload is the compressed concatenation of magic-``magic`` messages (snappy in
    snappy-java's stream framing). No values give an empty set (b"").
    """
    cid = codec_id(compression)
    _check_magic(magic)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _wrap(_encode_arrow(values, magic), cid)
    parts: list[Any] = []
    append = parts.append
    crc32 = zlib.crc32
    overhead = _OVERHEAD[magic]
    limit = _MAX_PAYLOAD[magic]
    pack = HEADER_V1.pack if magic == 1 else HEADER_V0.pack
    for value in values:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, (bytes, bytearray, memoryview)):
            raise SchemaError(
                f"message values must be bytes or str, got {type(value).__name__}"
            )
        size = len(value) if not isinstance(value, memoryview) else value.nbytes
        if size > limit:
            raise _too_large(size)
        if magic == 1:
            append(pack(size + overhead, 1, 0, crc32(value)))
        else:
            append(pack(size + overhead, 0, crc32(value)))
        append(value)
    return _wrap(b"".join(parts), cid)


def encode_message_set_arrow(
    values: pa.Array | pa.ChunkedArray, *, compression: str | int = "none", magic: int = 1
) -> bytes:
    """:func:`encode_message_set` for a pyarrow binary/string array (the writer's path)."""
    cid = codec_id(compression)
    _check_magic(magic)
    return _wrap(_encode_arrow(values, magic), cid)


def _encode_arrow(values: pa.Array | pa.ChunkedArray, magic: int) -> bytes:
    if isinstance(values, pa.ChunkedArray):
        chunks = values.chunks
        if len(chunks) == 1:
            return _encode_arrow(chunks[0], magic)
        return b"".join(_encode_arrow(chunk, magic) for chunk in chunks)
    n = len(values)
    if n == 0:
        return b""
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        offset_type: Any = np.int32
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        offset_type = np.int64
    elif pa.types.is_fixed_size_binary(kind) or pa.types.is_string_view(kind) or (
        pa.types.is_binary_view(kind)
    ):
        return _encode_arrow(values.cast(pa.large_binary()), magic)
    else:
        raise SchemaError(f"message values must be binary or string, got Arrow type {kind}")
    if values.null_count:
        first = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise MessageError(f"value at index {first} is null: a 0.7 message cannot be null")
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[values.offset : values.offset + n + 1]
    first_offset, last_offset = int(offsets[0]), int(offsets[-1])
    data = memoryview(buffers[2]) if buffers[2] is not None and last_offset > first_offset else (
        memoryview(b"")
    )
    sizes = np.diff(offsets)
    biggest = int(sizes.max())
    if biggest > _MAX_PAYLOAD[magic]:
        raise _too_large(biggest)
    starts = offsets[:-1].tolist()
    ends = offsets[1:].tolist()
    payloads = list(map(data.__getitem__, map(slice, starts, ends)))
    crcs = map(zlib.crc32, payloads)
    lengths = (sizes + _OVERHEAD[magic]).tolist()
    if magic == 1:
        headers = map(HEADER_V1.pack, lengths, repeat(1), repeat(0), crcs)
    else:
        headers = map(HEADER_V0.pack, lengths, repeat(0), crcs)
    parts: list[Any] = [None] * (2 * n)
    parts[0::2] = headers
    parts[1::2] = payloads
    return b"".join(parts)

