"""Kafka 0.7 message sets <-> Arrow: the pure codec (no sockets, no clocks).

Public API (see ``docs/dev/CONTRACTS.md``, "messages/")::

    MESSAGE_SCHEMA                       offset, next_offset, inner_index, compression, value
    DecodeResult                         batch, next_offset, bytes_consumed, message_count,
                                         partial_size
    decode_message_set(data, base_offset=0, *, verify_crc=True,
                       max_decompressed_size=64 << 20, stop_at=None) -> DecodeResult
    scan_boundaries(data, base_offset=0) -> (numpy int64 starts, next_offset)
    encode_message(payload, *, magic=1, codec=0) -> bytes
    encode_message_set(values, *, compression="none", magic=1) -> bytes
    encode_message_set_arrow(values, *, compression="none", magic=1) -> bytes
    encode_message_sets_arrow(values, boundaries, *, compression="none", magic=1, level=None,
                              crcs_out=None) -> list[bytes]
    codec_id(name_or_int) -> int, codec_name(name_or_int) -> str, CODEC_NAMES, CODEC_IDS

Modules: ``layout`` (the wire layout and constants), ``decode``, ``encode``, ``compression``
(gzip and snappy-java framing), ``crc`` (CRC-32 of many payloads in one pass; the CRC-32
and gzip engines: python-isal when it imports, else stdlib zlib).
"""

from __future__ import annotations

from kafka_pyspark._messages.decode import DecodeResult, decode_message_set, scan_boundaries
from kafka_pyspark._messages.encode import (
    encode_message,
    encode_message_set,
    encode_message_set_arrow,
    encode_message_sets_arrow,
)
from kafka_pyspark._messages.layout import (
    CODEC_GZIP,
    CODEC_IDS,
    CODEC_NAMES,
    CODEC_NONE,
    CODEC_SNAPPY,
    MAX_MESSAGE_LENGTH,
    MAX_NESTING_DEPTH,
    MESSAGE_SCHEMA,
    codec_id,
    codec_name,
)

__all__ = [
    "CODEC_GZIP",
    "CODEC_IDS",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "MAX_MESSAGE_LENGTH",
    "MAX_NESTING_DEPTH",
    "MESSAGE_SCHEMA",
    "DecodeResult",
    "codec_id",
    "codec_name",
    "decode_message_set",
    "encode_message",
    "encode_message_set",
    "encode_message_set_arrow",
    "encode_message_sets_arrow",
    "scan_boundaries",
]
