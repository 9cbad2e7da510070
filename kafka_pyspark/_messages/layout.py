"""Kafka 0.7 message layout (docs/dev/PROTOCOL.md "Messages").

A message set is messages back to back: no count, no padding, no trailer. Offsets are byte
positions in the partition log, so the message after the one at ``offset`` is at
``offset + 4 + LENGTH``::

    int32   LENGTH       bytes of the message after this field
    int8    MAGIC        0: no ATTRIBUTES byte (Kafka 0.6); 1: ATTRIBUTES present (0.7)
    int8    ATTRIBUTES   magic 1 only; ``ATTRIBUTES & 0x03`` is the codec (0.7.2's
                         ``CompressionCodecMask``): 0 none, 1 gzip, 2 snappy, 3 unknown
    uint32  CRC32        zlib CRC-32 of PAYLOAD only (not of the header)
    bytes   PAYLOAD      LENGTH - 5 (magic 0) or LENGTH - 6 (magic 1) bytes

A compressed message (magic 1, codec 1 or 2) is a *wrapper*: its PAYLOAD decompresses to a
complete message set whose messages are the real ones (docs/dev/PROTOCOL.md "Compression by
nesting"). 0.7.2 decodes nested wrappers too (gzip inside gzip: docs/dev/PROTOCOL.md "Measured:
compression"), so the decoder recurses, bounded by :data:`MAX_NESTING_DEPTH`. Compressed payload
formats:

    gzip    RFC 1952 members (with or without mtime; several members are concatenated);
            a zlib stream without the gzip header is rejected, as 0.7.2 does
    snappy  snappy-java stream framing, as 0.7.2's producer writes it::

                "\\x82SNAPPY\\x00" | int32 version (1) | int32 min compatible version (1)
                then blocks: int32 compressed length | raw snappy block (<= 32 KiB of input)

            or one raw snappy block (snappy-java falls back to raw when the header is absent);
            the snappy "framing format" (``\\xff\\x06\\x00\\x00sNaPpY``) is rejected
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import pyarrow as pa

from kafka_pyspark.errors import UnknownCodecError

LENGTH = struct.Struct(">i")  # LENGTH
HEADER_V0 = struct.Struct(">iBI")  # LENGTH, MAGIC (0), CRC32
HEADER_V1 = struct.Struct(">iBBI")  # LENGTH, MAGIC (1), ATTRIBUTES, CRC32

LENGTH_SIZE = LENGTH.size  # 4
HEADER_V0_SIZE = HEADER_V0.size  # 9: bytes before a magic-0 payload
HEADER_V1_SIZE = HEADER_V1.size  # 10: bytes before a magic-1 payload
MAGIC_OFFSET = LENGTH_SIZE  # the MAGIC byte, right after LENGTH
ATTRIBUTES_OFFSET = MAGIC_OFFSET + 1  # magic 1 only
MIN_LENGTH_V0 = HEADER_V0_SIZE - LENGTH_SIZE  # 5: MAGIC + CRC32, empty payload
MIN_LENGTH_V1 = HEADER_V1_SIZE - LENGTH_SIZE  # 6: MAGIC + ATTRIBUTES + CRC32, empty payload
MIN_LENGTH = MIN_LENGTH_V0

MAGIC_V0 = 0
MAGIC_V1 = 1
# MAGIC -> LENGTH of a message with an empty payload (payload size = LENGTH - this)
MIN_LENGTH_BY_MAGIC: Mapping[int, int] = {MAGIC_V0: MIN_LENGTH_V0, MAGIC_V1: MIN_LENGTH_V1}
CODEC_MASK = 0x03  # 0.7.2 Message.CompressionCodeMask

# No 0.7 message can be this large: a broker takes a produce request of at most
# ``max.socket.request.bytes`` (100 MiB by default) and a FETCH max size is an int32. A LENGTH
# above this bound is corruption (or an offset in the middle of a message), not a big message.
MAX_MESSAGE_LENGTH = 1 << 30

# Wrappers inside wrappers (gzip in gzip) are legal; deeper than this is taken as hostile.
MAX_NESTING_DEPTH = 8

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_NAMES: Mapping[int, str] = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy"}
CODEC_IDS: Mapping[str, int] = {name: cid for cid, name in CODEC_NAMES.items()}
#: every spelling of a codec that ``compression.codec`` and :func:`codec_id` take (lower-case):
#: the names, 0.7's producer integers as text, and two more spellings of "none"
CODEC_ALIASES: Mapping[str, int] = {
    **CODEC_IDS,
    **{str(cid): cid for cid in CODEC_NAMES},
    "uncompressed": CODEC_NONE,
    "nocompression": CODEC_NONE,
}

MESSAGE_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), False),  # the (outer) message's byte offset
        pa.field("next_offset", pa.int64(), False),  # offset after the (outer) message
        pa.field("inner_index", pa.int32(), False),  # position inside a wrapper, else 0
        pa.field("compression", pa.string(), False),  # codec of the outer wrapper
        pa.field("value", pa.binary(), True),  # the payload (never null in 0.7)
    ]
)


def codec_id(codec: str | int) -> int:
    """The codec id for ``codec``: 0/1/2 or a :data:`CODEC_ALIASES` spelling (``"gzip"``, ``"1"``).

    Names are case-insensitive (0.7's producer config ``compression.codec`` takes integers;
    the data source also takes names). Anything else raises :class:`UnknownCodecError`.
    """
    if isinstance(codec, bool):
        raise UnknownCodecError(f"unknown compression codec {codec!r}")
    if isinstance(codec, int):
        if codec in CODEC_NAMES:
            return codec
        raise UnknownCodecError(f"unknown compression codec {codec} (0 none, 1 gzip, 2 snappy)")
    if isinstance(codec, str):
        text = codec.strip().lower()
        if text in CODEC_ALIASES:
            return CODEC_ALIASES[text]
    raise UnknownCodecError(f"unknown compression codec {codec!r} (none, gzip or snappy)")


def codec_name(codec: str | int) -> str:
    """The name (``"none"``, ``"gzip"``, ``"snappy"``) of a codec id or name."""
    return CODEC_NAMES[codec_id(codec)]
