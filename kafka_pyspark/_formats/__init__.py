"""The later Kafka on-disk formats (docs/dev/PROTOCOL.md "Later on-disk formats"), for reading
archived ``.log`` segments. Pure: bytes in, Arrow out; no I/O. 0.7's
``.kafka`` format is :mod:`kafka_pyspark._messages`.

Public API::

    LOG_SCHEMA                      offset, next_offset, inner_index, compression, value, key,
                                    timestamp, timestamp_type, headers
    decode_log(data, base_position=0, *, verify_crc=True, max_decompressed_size=64 << 20,
               stop_at=None) -> LogChunk
    scan_log(data, base_position=0) -> (numpy int64 entry positions, end position)
    LogChunk, TxnBatch, Marker      what decode_log found (rows, transactions, markers)
    CODEC_NAMES                     0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd

Modules: ``layout`` (byte layouts and constants), ``log`` (walk + dispatch on MAGIC),
``legacy`` (message sets v0/v1), ``v2`` (record batches), ``varint``, ``codecs`` (bounded
gzip/snappy/lz4/zstd; the KAFKA-3160 lz4 header checksum).
"""

from __future__ import annotations

from kafka_pyspark._formats.batch_layout import CODEC_NAMES, LOG_SCHEMA
from kafka_pyspark._formats.segment_log import LogChunk, decode_log, scan_log
from kafka_pyspark._formats.v2 import Marker, TxnBatch

__all__ = ["CODEC_NAMES", "LOG_SCHEMA", "LogChunk", "Marker", "TxnBatch", "decode_log", "scan_log"]
