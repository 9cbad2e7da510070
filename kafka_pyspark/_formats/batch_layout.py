"""On-disk layout of the later Kafka log formats (docs/dev/PROTOCOL.md "Later on-disk formats",
after the Apache Kafka documentation's "Message Format").

A ``.log`` segment file (Kafka 0.8 and later) is a sequence of *entries* back to back: old
message-set entries (magic 0 and 1) and record batches (magic 2), possibly both in one file
after a message-format upgrade. Every entry starts with the same 12 bytes, and its MAGIC byte
sits at byte 16 in both layouts, so one walk reads them all::

    int64   OFFSET        v0/v1: the message's (or wrapper's) logical offset; v2: baseOffset
    int32   SIZE          bytes of the entry after this field (v2: batchLength)
    4 bytes               v0/v1: CRC32; v2: partitionLeaderEpoch
    int8    MAGIC         0, 1 or 2

Message (magic 0 and 1), after OFFSET and SIZE::

    uint32  CRC32         zlib CRC-32 of MAGIC .. end of value (not CRC-32C)
    int8    MAGIC         0 or 1
    int8    ATTRIBUTES    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4); bit 3 (magic 1):
                          timestamp type (0 create time, 1 log append time)
    int64   TIMESTAMP     magic 1 only; -1: none
    int32   KEY LENGTH    -1: null key
    bytes   KEY
    int32   VALUE LENGTH  -1: null value
    bytes   VALUE         of a compressed wrapper: a compressed message set (nested entries)

Inner offsets of a wrapper: magic 0 absolute; magic 1 relative (0 .. n-1), the wrapper's
OFFSET being the absolute offset of the last inner message.

Record batch (magic 2), 61 bytes of header then the records::

    int64   baseOffset
    int32   batchLength           bytes after this field
    int32   partitionLeaderEpoch  (not covered by the CRC)
    int8    magic                 2
    uint32  crc                   CRC-32C (Castagnoli) of attributes .. end of batch
    int16   attributes            bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd);
                                  bit 3 timestamp type; bit 4 transactional; bit 5 control;
                                  bit 6 delete horizon (baseTimestamp is the horizon)
    int32   lastOffsetDelta
    int64   baseTimestamp
    int64   maxTimestamp
    int64   producerId
    int16   producerEpoch
    int32   baseSequence
    int32   records count
    records (compressed as one block when the codec is not 0), each::

        varint  length     bytes of the record after this field
        int8    attributes (unused)
        varlong timestampDelta
        varint  offsetDelta
        varint  keyLength  -1: null
        bytes   key
        varint  valueLength -1: null
        bytes   value
        varint  header count, then per header: varint key length, key (UTF-8),
                varint value length (-1: null), value

Varints are zigzag-encoded base-128 little-endian groups, as Protobuf's ``sint32/sint64``.
A control batch holds one record whose key is ``int16 version, int16 type`` (0 abort,
1 commit); it is never passed to users.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import pyarrow as pa

ENTRY_HEADER = struct.Struct(">qi")  # OFFSET / baseOffset, SIZE / batchLength
ENTRY_HEADER_SIZE = ENTRY_HEADER.size  # 12
MAGIC_POSITION = 16  # MAGIC, counted from the entry's first byte, in every layout
ENTRY_PREFIX_SIZE = MAGIC_POSITION + 1  # bytes needed to know an entry's size and magic

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2

# --- message sets v0/v1 (after OFFSET and SIZE) -------------------------------------------
MESSAGE_HEAD = struct.Struct(">IBB")  # CRC32, MAGIC, ATTRIBUTES
TIMESTAMP = struct.Struct(">q")  # TIMESTAMP (magic 1 only)
BYTES_LENGTH = struct.Struct(">i")  # KEY LENGTH / VALUE LENGTH, -1 for null
MESSAGE_CRC_START = 4  # the CRC32 covers MAGIC .. end: bytes after the CRC field
LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE = 0x08  # ATTRIBUTES bit 3 (magic 1)
# SIZE of a message with null key and value: CRC, MAGIC, ATTRIBUTES, [TIMESTAMP], 2 lengths
MIN_MESSAGE_SIZE: Mapping[int, int] = {
    MAGIC_V0: MESSAGE_HEAD.size + 2 * BYTES_LENGTH.size,  # 14
    MAGIC_V1: MESSAGE_HEAD.size + TIMESTAMP.size + 2 * BYTES_LENGTH.size,  # 22
}

# --- record batch v2 ----------------------------------------------------------------------
BATCH_HEADER = struct.Struct(
    ">q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "B"  # magic
    "I"  # crc (CRC-32C)
    "H"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # records count
)
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 61
BATCH_CRC_START = 21  # attributes: the first byte the CRC-32C covers
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - ENTRY_HEADER_SIZE  # 49: a batch with no records
LAST_OFFSET_DELTA = struct.Struct(">i")  # lastOffsetDelta, read by the entry walk
LAST_OFFSET_DELTA_AT = 23  # its position in the batch
CONTROL_KEY = struct.Struct(">hh")  # control record key: version, type
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

BATCH_CODEC_MASK = 0x07
BATCH_TIMESTAMP_TYPE = 0x08
BATCH_TRANSACTIONAL = 0x10
BATCH_CONTROL = 0x20

# --- offset index (``%020d.index`` beside a ``.log`` file, Kafka's OffsetIndex) ------------
# Entries of 8 bytes, sparse (one per ~4 KiB of log), in increasing order; a file still being
# written is preallocated, its unused tail zero; no checksum (Kafka rebuilds it after a crash)::
#
#     int32   relative offset   the largest offset of an append, minus the file's base offset
#     int32   position          byte position in the .log file where that append starts
OFFSET_INDEX_ENTRY = struct.Struct(">ii")

# --- shared --------------------------------------------------------------------------------
CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
CODEC_NAMES: Mapping[int, str] = {
    CODEC_NONE: "none",
    CODEC_GZIP: "gzip",
    CODEC_SNAPPY: "snappy",
    CODEC_LZ4: "lz4",
    CODEC_ZSTD: "zstd",
}
LEGACY_CODECS = frozenset({CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4})

NO_TIMESTAMP = -1  # a TIMESTAMP of -1 is "none" (Kafka's RecordBatch.NO_TIMESTAMP): null
NO_TIMESTAMP_TYPE = -1  # timestamp_type of rows whose format has no timestamp (0.7, magic 0)
CREATE_TIME = 0
LOG_APPEND_TIME = 1

# An entry SIZE above this is corruption (Kafka's message.max.bytes is an int32 and far lower).
MAX_ENTRY_SIZE = 1 << 30
MAX_NESTING_DEPTH = 8  # wrappers inside wrappers (magic 0/1): deeper is taken as hostile

HEADER_TYPE = pa.struct([pa.field("key", pa.string(), False), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE, False))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

#: Decoded rows of a ``.log`` segment (the I/O layer adds topic, broker, partition in front).
LOG_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), False),  # the logical offset of the record
        pa.field("next_offset", pa.int64(), False),  # offset + 1
        pa.field("inner_index", pa.int32(), False),  # position in its wrapper / batch
        pa.field("compression", pa.string(), False),  # codec of the wrapper / batch
        pa.field("value", pa.binary(), True),
        pa.field("key", pa.binary(), True),
        pa.field("timestamp", TIMESTAMP_TYPE, True),  # null: none (magic 0, or -1)
        pa.field("timestamp_type", pa.int32(), False),  # 0 create, 1 log append, -1 none
        pa.field("headers", HEADERS_TYPE, True),  # null for magic 0/1 (no headers)
    ]
)
# immutable: shared (not from_pylist: that imports pandas in every fresh Python worker)
EMPTY_LOG_BATCH = pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in LOG_SCHEMA],
                                             schema=LOG_SCHEMA)
