"""Golden bytes for every 0.7 request and response, written by hand from the layouts.

Sources: docs/dev/PROTOCOL.md "Requests and responses" (request header, multi-request header,
PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS, response header) and its measured sections
(the MULTIFETCH response layout and the observed bytes). All integers big-endian. Each vector is
checked both ways: ``encode(object) == golden`` and ``decode(golden) == object``.

Message sets are opaque to the wire layer, but the ones used here are real magic-1 messages
(``int32 LENGTH | int8 MAGIC=1 | int8 COMPRESSION=0 | int32 CRC32(payload) | payload``) so the
vectors are also valid broker traffic; ``test_embedded_messages_are_valid`` checks their CRCs.
"""

from __future__ import annotations

import re
import struct
import zlib

import pytest

from kafka_pyspark import _wire as wire
from kafka_pyspark._wire import (
    FetchRequest,
    FetchResponse,
    MultiFetchRequest,
    MultiFetchResponse,
    MultiProduceRequest,
    OffsetsRequest,
    OffsetsResponse,
    ProduceRequest,
)
from kafka_pyspark.errors import ProtocolError


def hexbytes(text: str) -> bytes:
    """Hex digits from ``text``; ``#`` starts a comment, whitespace and ``|`` are ignored."""
    digits = "".join(re.sub(r"#.*", "", line) for line in text.splitlines())
    return bytes.fromhex(re.sub(r"[\s|]", "", digits))


# --- message sets used inside the vectors -------------------------------------------------

MSG_HI = hexbytes("""
    00000008            # LENGTH = 8 (magic + compression + crc + 2-byte payload)
    01                  # MAGIC = 1 (0.7: compression byte present)
    00                  # COMPRESSION = 0 (none)
    d8932aac            # CRC32("hi")
    6869                # PAYLOAD "hi"
""")
MSG_ABC = hexbytes("""
    00000009 01 00      # LENGTH = 9, MAGIC 1, no compression
    352441c2            # CRC32("abc")
    616263              # "abc"
""")
# PROTOCOL.md "Measured: FETCH": three messages of 17 bytes at offsets 0, 17, 34; log end 51.
THREE_MESSAGES = hexbytes("""
    0000000d 01 00 6241472a 68656c6c6f2d31    # offset 0:  LENGTH 13, "hello-1"
    0000000d 01 00 fb481690 68656c6c6f2d32    # offset 17: LENGTH 13, "hello-2"
    0000000d 01 00 8c4f2606 68656c6c6f2d33    # offset 34: LENGTH 13, "hello-3"
""")
# 30 bytes: two messages of 15 bytes
TWO_MESSAGES = hexbytes("""
    0000000b 01 00 3a771143 776f726c64        # LENGTH 11, "world"
    0000000b 01 00 93a15bfc 616761696e        # LENGTH 11, "again"
""")


def test_embedded_messages_are_valid() -> None:
    for data, payloads in (
        (MSG_HI, [b"hi"]),
        (MSG_ABC, [b"abc"]),
        (THREE_MESSAGES, [b"hello-1", b"hello-2", b"hello-3"]),
        (TWO_MESSAGES, [b"world", b"again"]),
    ):
        pos = 0
        for payload in payloads:
            (length,) = struct.unpack_from(">i", data, pos)
            assert length == 6 + len(payload)
            magic, codec, crc = struct.unpack_from(">bbI", data, pos + 4)
            assert (magic, codec) == (1, 0)
            assert data[pos + 10 : pos + 4 + length] == payload
            assert crc == zlib.crc32(payload)
            pos += 4 + length
        assert pos == len(data)
    assert len(THREE_MESSAGES) == 51
    assert len(TWO_MESSAGES) == 30


# --- requests ------------------------------------------------------------------------------

PRODUCE_GOLDEN = hexbytes("""
    0000001c            # REQUEST_LENGTH = 28 (excludes itself)
    0000                # REQUEST_TYPE = PRODUCE (0)
    0004 74657374       # TOPIC_LENGTH = 4, TOPIC = "test"
    00000001            # PARTITION = 1
    0000000c            # MESSAGES_LENGTH = 12
    00000008 01 00 d8932aac 6869   # MESSAGES: one message "hi"
""")
PRODUCE_OBJ = ProduceRequest("test", 1, MSG_HI)

# PRODUCE to partition -1: 0.7.2 stores it on a random partition (PROTOCOL.md "Measured: PRODUCE")
PRODUCE_RANDOM_GOLDEN = hexbytes("""
    0000001c 0000       # REQUEST_LENGTH = 28, PRODUCE
    0004 74657374       # "test"
    ffffffff            # PARTITION = -1
    0000000c            # MESSAGES_LENGTH = 12
    00000008 01 00 d8932aac 6869
""")
PRODUCE_RANDOM_OBJ = ProduceRequest("test", -1, MSG_HI)

PRODUCE_EMPTY_GOLDEN = hexbytes("""
    00000012            # REQUEST_LENGTH = 18
    0000                # PRODUCE
    0006 6576656e7473   # TOPIC "events"
    00000000            # PARTITION = 0
    00000000            # MESSAGES_LENGTH = 0, no messages
""")
PRODUCE_EMPTY_OBJ = ProduceRequest("events", 0, b"")

FETCH_GOLDEN = hexbytes("""
    00000018            # REQUEST_LENGTH = 24
    0001                # REQUEST_TYPE = FETCH (1)
    0004 74657374       # TOPIC_LENGTH = 4, TOPIC = "test"
    00000001            # PARTITION = 1
    0000000000000033    # OFFSET = 51 (int64)
    0004b000            # MAX_SIZE = 307200 (int32)
""")
FETCH_OBJ = FetchRequest("test", 1, 51, 307200)

# the partition-count probe: max size 0 (PROTOCOL.md "Measured: FETCH": empty set or error 3)
FETCH_PROBE_GOLDEN = hexbytes("""
    00000018 0001       # REQUEST_LENGTH = 24, FETCH
    0004 74657374       # "test"
    00000007            # PARTITION = 7
    0000000000000000    # OFFSET = 0
    00000000            # MAX_SIZE = 0
""")
FETCH_PROBE_OBJ = FetchRequest("test", 7, 0, 0)

FETCH_BIG_OFFSET_GOLDEN = hexbytes("""
    00000018 0001       # REQUEST_LENGTH = 24, FETCH
    0004 74657374       # "test"
    00000000            # PARTITION = 0
    0000000100000000    # OFFSET = 2**32 (past 4 GiB: needs all 64 bits)
    00100000            # MAX_SIZE = 1048576 (0.7.2 consumer fetch.size default)
""")
FETCH_BIG_OFFSET_OBJ = FetchRequest("test", 0, 1 << 32, 1 << 20)

MULTIFETCH_GOLDEN = hexbytes("""
    00000030            # REQUEST_LENGTH = 48
    0002                # REQUEST_TYPE = MULTIFETCH (2)
    0002                # TOPICPARTITION_COUNT = 2 (no top-level topic/partition)
    0004 74657374       # fetch 1: TOPIC "test"
    00000000            #          PARTITION = 0
    0000000000000000    #          OFFSET = 0
    00100000            #          MAX_SIZE = 1048576
    0004 6c6f6773       # fetch 2: TOPIC "logs"
    00000001            #          PARTITION = 1
    0000000000000033    #          OFFSET = 51
    00010000            #          MAX_SIZE = 65536
""")
MULTIFETCH_OBJ = MultiFetchRequest(
    (FetchRequest("test", 0, 0, 1 << 20), FetchRequest("logs", 1, 51, 65536))
)

MULTIFETCH_EMPTY_GOLDEN = hexbytes("""
    00000004            # REQUEST_LENGTH = 4
    0002 0000           # MULTIFETCH, TOPICPARTITION_COUNT = 0
""")
MULTIFETCH_EMPTY_OBJ = MultiFetchRequest(())

MULTIPRODUCE_GOLDEN = hexbytes("""
    00000039            # REQUEST_LENGTH = 57
    0003                # REQUEST_TYPE = MULTIPRODUCE (3)
    0002                # TOPICPARTITION_COUNT = 2
    0004 74657374       # produce 1: TOPIC "test"
    00000000            #            PARTITION = 0
    0000000c            #            MESSAGES_LENGTH = 12
    00000008 01 00 d8932aac 6869          # "hi"
    0004 6c6f6773       # produce 2: TOPIC "logs"
    00000001            #            PARTITION = 1
    0000000d            #            MESSAGES_LENGTH = 13
    00000009 01 00 352441c2 616263        # "abc"
""")
MULTIPRODUCE_OBJ = MultiProduceRequest(
    (ProduceRequest("test", 0, MSG_HI), ProduceRequest("logs", 1, MSG_ABC))
)

OFFSETS_EARLIEST_GOLDEN = hexbytes("""
    00000018            # REQUEST_LENGTH = 24
    0004                # REQUEST_TYPE = OFFSETS (4)
    0004 74657374       # TOPIC "test"
    00000001            # PARTITION = 1
    fffffffffffffffe    # TIME = -2 (EARLIEST)
    00000001            # MAX_NUMBER = 1
""")
OFFSETS_EARLIEST_OBJ = OffsetsRequest("test", 1, wire.OFFSETS_EARLIEST, 1)

OFFSETS_LATEST_GOLDEN = hexbytes("""
    00000018 0004       # REQUEST_LENGTH = 24, OFFSETS
    0004 74657374       # "test"
    00000000            # PARTITION = 0
    ffffffffffffffff    # TIME = -1 (LATEST)
    0000000a            # MAX_NUMBER = 10
""")
OFFSETS_LATEST_OBJ = OffsetsRequest("test", 0, wire.OFFSETS_LATEST, 10)

OFFSETS_TIME_GOLDEN = hexbytes("""
    00000018 0004       # REQUEST_LENGTH = 24, OFFSETS
    0004 74657374       # "test"
    00000000            # PARTITION = 0
    0000018bcfe56800    # TIME = 1700000000000 ms since the epoch
    7fffffff            # MAX_NUMBER = 2**31 - 1
""")
OFFSETS_TIME_OBJ = OffsetsRequest("test", 0, 1_700_000_000_000, 2**31 - 1)

REQUESTS = [
    pytest.param(PRODUCE_GOLDEN, PRODUCE_OBJ, id="produce"),
    pytest.param(PRODUCE_RANDOM_GOLDEN, PRODUCE_RANDOM_OBJ, id="produce-partition-minus-1"),
    pytest.param(PRODUCE_EMPTY_GOLDEN, PRODUCE_EMPTY_OBJ, id="produce-empty"),
    pytest.param(FETCH_GOLDEN, FETCH_OBJ, id="fetch"),
    pytest.param(FETCH_PROBE_GOLDEN, FETCH_PROBE_OBJ, id="fetch-probe"),
    pytest.param(FETCH_BIG_OFFSET_GOLDEN, FETCH_BIG_OFFSET_OBJ, id="fetch-offset-2**32"),
    pytest.param(MULTIFETCH_GOLDEN, MULTIFETCH_OBJ, id="multifetch"),
    pytest.param(MULTIFETCH_EMPTY_GOLDEN, MULTIFETCH_EMPTY_OBJ, id="multifetch-empty"),
    pytest.param(MULTIPRODUCE_GOLDEN, MULTIPRODUCE_OBJ, id="multiproduce"),
    pytest.param(OFFSETS_EARLIEST_GOLDEN, OFFSETS_EARLIEST_OBJ, id="offsets-earliest"),
    pytest.param(OFFSETS_LATEST_GOLDEN, OFFSETS_LATEST_OBJ, id="offsets-latest"),
    pytest.param(OFFSETS_TIME_GOLDEN, OFFSETS_TIME_OBJ, id="offsets-time"),
]


@pytest.mark.parametrize(("golden", "obj"), REQUESTS)
def test_request_encode(golden: bytes, obj: wire.Request) -> None:
    assert wire.encode_request(obj).hex() == golden.hex()


def test_multiproduce_laid_out_from_its_pieces() -> None:
    """The producer's way to a MULTIPRODUCE: the frame's head, then per item its head and its
    message set, as the scatter-gather send puts them on the socket."""
    items = [wire.produce_item_head("test", 0, len(MSG_HI)), MSG_HI,
             wire.produce_item_head("logs", 1, len(MSG_ABC)), MSG_ABC]
    frame = wire.multiproduce_head(2, sum(map(len, items))) + b"".join(items)
    assert frame.hex() == MULTIPRODUCE_GOLDEN.hex()
    assert wire.produce_item_head("test", 7, 300).hex() == "000474657374" "00000007" "0000012c"


def test_produce_item_heads_out_of_range_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match=r"partition 2147483648 .* int32"):
        wire.produce_item_head("t", 2**31, 1)
    with pytest.raises(ProtocolError, match="not ASCII"):
        wire.produce_item_head("caf\u00e9", 0, 1)
    with pytest.raises(ProtocolError, match="at most 32767 items"):
        wire.multiproduce_head(32768, 0)


@pytest.mark.parametrize(("golden", "obj"), REQUESTS)
def test_request_decode(golden: bytes, obj: wire.Request) -> None:
    assert wire.frame_length(golden[:4]) == len(golden) - 4
    assert wire.decode_request(golden[4:]) == obj
    assert wire.decode_request(memoryview(golden)[4:]) == obj


def test_request_type_constants() -> None:
    assert (wire.PRODUCE, wire.FETCH, wire.MULTIFETCH, wire.MULTIPRODUCE, wire.OFFSETS) == (
        0, 1, 2, 3, 4
    )
    assert (wire.OFFSETS_LATEST, wire.OFFSETS_EARLIEST) == (-1, -2)


# --- responses -----------------------------------------------------------------------------

# PROTOCOL.md "Measured: FETCH": FETCH at 0 answers 00000035 0000 + the 51 bytes as produced
FETCH_RESPONSE_GOLDEN = hexbytes("""
    00000035            # RESPONSE_LENGTH = 53 = 2 + 51
    0000                # ERROR_CODE = 0 (NoError)
    0000000d 01 00 6241472a 68656c6c6f2d31    # MESSAGES (51 bytes)
    0000000d 01 00 fb481690 68656c6c6f2d32
    0000000d 01 00 8c4f2606 68656c6c6f2d33
""")
FETCH_RESPONSE_OBJ = FetchResponse(0, THREE_MESSAGES)

# a FETCH cut by MAX_SIZE 16 (PROTOCOL.md "Measured: FETCH": error 0 and a truncated body, not 4)
FETCH_RESPONSE_PARTIAL_GOLDEN = hexbytes("""
    00000012            # RESPONSE_LENGTH = 18 = 2 + 16
    0000                # ERROR_CODE = 0
    0000000d 01 00 6241472a 68656c6c6f2d   # the first 16 of 17 bytes: a partial message
""")
FETCH_RESPONSE_PARTIAL_OBJ = FetchResponse(0, THREE_MESSAGES[:16])

FETCH_RESPONSE_EMPTY_GOLDEN = hexbytes("""
    00000002 0000       # RESPONSE_LENGTH = 2, NoError, no messages (offset at log end)
""")
FETCH_RESPONSE_EMPTY_OBJ = FetchResponse(0, b"")

FETCH_RESPONSE_OUT_OF_RANGE_GOLDEN = hexbytes("""
    00000002            # RESPONSE_LENGTH = 2
    0001                # ERROR_CODE = 1 (OffsetOutOfRange)
""")
FETCH_RESPONSE_OUT_OF_RANGE_OBJ = FetchResponse(1, b"")

FETCH_RESPONSE_WRONG_PARTITION_GOLDEN = hexbytes("""
    00000002 0003       # RESPONSE_LENGTH = 2, ERROR_CODE = 3 (WrongPartition)
""")
FETCH_RESPONSE_WRONG_PARTITION_OBJ = FetchResponse(3, b"")

FETCH_RESPONSE_UNKNOWN_GOLDEN = hexbytes("""
    00000002 ffff       # RESPONSE_LENGTH = 2, ERROR_CODE = -1 (Unknown)
""")
FETCH_RESPONSE_UNKNOWN_OBJ = FetchResponse(-1, b"")

FETCH_RESPONSES = [
    pytest.param(FETCH_RESPONSE_GOLDEN, FETCH_RESPONSE_OBJ, id="three-messages"),
    pytest.param(FETCH_RESPONSE_PARTIAL_GOLDEN, FETCH_RESPONSE_PARTIAL_OBJ, id="partial"),
    pytest.param(FETCH_RESPONSE_EMPTY_GOLDEN, FETCH_RESPONSE_EMPTY_OBJ, id="empty"),
    pytest.param(
        FETCH_RESPONSE_OUT_OF_RANGE_GOLDEN, FETCH_RESPONSE_OUT_OF_RANGE_OBJ, id="out-of-range"
    ),
    pytest.param(
        FETCH_RESPONSE_WRONG_PARTITION_GOLDEN,
        FETCH_RESPONSE_WRONG_PARTITION_OBJ,
        id="wrong-partition",
    ),
    pytest.param(FETCH_RESPONSE_UNKNOWN_GOLDEN, FETCH_RESPONSE_UNKNOWN_OBJ, id="unknown"),
]


@pytest.mark.parametrize(("golden", "obj"), FETCH_RESPONSES)
def test_fetch_response_encode(golden: bytes, obj: FetchResponse) -> None:
    assert wire.encode_fetch_response(obj.error, obj.messages).hex() == golden.hex()
    header = wire.encode_fetch_response_header(obj.error, len(obj.messages))
    assert (header + bytes(obj.messages)).hex() == golden.hex()


@pytest.mark.parametrize(("golden", "obj"), FETCH_RESPONSES)
def test_fetch_response_decode(golden: bytes, obj: FetchResponse) -> None:
    assert wire.frame_length(golden[:4]) == len(golden) - 4
    decoded = wire.decode_fetch_response(golden[4:])
    assert decoded == obj
    assert bytes(decoded.messages) == bytes(obj.messages)


def test_fetch_response_messages_are_a_zero_copy_view() -> None:
    body = bytearray(FETCH_RESPONSE_GOLDEN[4:])
    decoded = wire.decode_fetch_response(memoryview(body))
    assert isinstance(decoded.messages, memoryview)
    body[2] = 0xEE  # the view sees the buffer, not a copy
    assert decoded.messages[0] == 0xEE


# PROTOCOL.md "Measured: OFFSETS": latest (-1, max 10) answered [51, 0]
OFFSETS_RESPONSE_GOLDEN = hexbytes("""
    00000016            # RESPONSE_LENGTH = 22 = 2 + 4 + 2 * 8
    0000                # ERROR_CODE = 0
    00000002            # NUMBER_OFFSETS = 2
    0000000000000033    # 51: log end
    0000000000000000    # 0: segment start (descending order)
""")
OFFSETS_RESPONSE_OBJ = OffsetsResponse(0, (51, 0))

OFFSETS_RESPONSE_EARLIEST_GOLDEN = hexbytes("""
    0000000e 0000       # RESPONSE_LENGTH = 14 = 2 + 4 + 8, NoError
    00000001            # NUMBER_OFFSETS = 1
    0000000000000000    # 0
""")
OFFSETS_RESPONSE_EARLIEST_OBJ = OffsetsResponse(0, (0,))

OFFSETS_RESPONSE_NONE_GOLDEN = hexbytes("""
    00000006 0000       # RESPONSE_LENGTH = 6, NoError
    00000000            # NUMBER_OFFSETS = 0 (TIME 0: no segment that old)
""")
OFFSETS_RESPONSE_NONE_OBJ = OffsetsResponse(0, ())

OFFSETS_RESPONSE_BIG_GOLDEN = hexbytes("""
    00000016 0000       # RESPONSE_LENGTH = 22, NoError
    00000002            # NUMBER_OFFSETS = 2
    0000000140000000    # 5368709120 (5 GiB: a 64-bit offset)
    0000000040000000    # 1073741824 (1 GiB segment start)
""")
OFFSETS_RESPONSE_BIG_OBJ = OffsetsResponse(0, (5 << 30, 1 << 30))

OFFSETS_RESPONSES = [
    pytest.param(OFFSETS_RESPONSE_GOLDEN, OFFSETS_RESPONSE_OBJ, id="latest"),
    pytest.param(OFFSETS_RESPONSE_EARLIEST_GOLDEN, OFFSETS_RESPONSE_EARLIEST_OBJ, id="earliest"),
    pytest.param(OFFSETS_RESPONSE_NONE_GOLDEN, OFFSETS_RESPONSE_NONE_OBJ, id="none"),
    pytest.param(OFFSETS_RESPONSE_BIG_GOLDEN, OFFSETS_RESPONSE_BIG_OBJ, id="64-bit"),
]


@pytest.mark.parametrize(("golden", "obj"), OFFSETS_RESPONSES)
def test_offsets_response_encode(golden: bytes, obj: OffsetsResponse) -> None:
    assert wire.encode_offsets_response(obj.error, obj.offsets).hex() == golden.hex()


@pytest.mark.parametrize(("golden", "obj"), OFFSETS_RESPONSES)
def test_offsets_response_decode(golden: bytes, obj: OffsetsResponse) -> None:
    assert wire.frame_length(golden[:4]) == len(golden) - 4
    assert wire.decode_offsets_response(golden[4:]) == obj


def test_offsets_response_error_without_offsets() -> None:
    # an error code alone (no NUMBER_OFFSETS) is accepted as "error, no offsets"
    assert wire.decode_offsets_response(hexbytes("0001")) == OffsetsResponse(1, ())


# PROTOCOL.md "Measured: MULTIFETCH", exactly as observed:
# 0000006b 0000 | 00000035 0000 <51 bytes> | 00000020 0000 <30 bytes> | 00000002 0003 |
# 00000002 0001
MULTIFETCH_RESPONSE_GOLDEN = hexbytes("""
    0000006b            # RESPONSE_LENGTH = 107
    0000                # ERROR_CODE = 0 (top level: always 0)
    00000035            # part 1: length 53 = 2 + 51
    0000                #         ERROR_CODE = 0
    0000000d 01 00 6241472a 68656c6c6f2d31    # 51 bytes of messages
    0000000d 01 00 fb481690 68656c6c6f2d32
    0000000d 01 00 8c4f2606 68656c6c6f2d33
    00000020            # part 2: length 32 = 2 + 30
    0000                #         ERROR_CODE = 0
    0000000b 01 00 3a771143 776f726c64        # 30 bytes of messages
    0000000b 01 00 93a15bfc 616761696e
    00000002            # part 3: length 2 (no messages)
    0003                #         ERROR_CODE = 3 (WrongPartition)
    00000002            # part 4: length 2
    0001                #         ERROR_CODE = 1 (OffsetOutOfRange)
""")
MULTIFETCH_RESPONSE_OBJ = MultiFetchResponse(
    0,
    (
        FetchResponse(0, THREE_MESSAGES),
        FetchResponse(0, TWO_MESSAGES),
        FetchResponse(3, b""),
        FetchResponse(1, b""),
    ),
)

MULTIFETCH_RESPONSE_EMPTY_GOLDEN = hexbytes("""
    00000002 0000       # RESPONSE_LENGTH = 2, ERROR_CODE = 0, no parts (no fetches asked)
""")
MULTIFETCH_RESPONSE_EMPTY_OBJ = MultiFetchResponse(0, ())

MULTIFETCH_RESPONSES = [
    pytest.param(MULTIFETCH_RESPONSE_GOLDEN, MULTIFETCH_RESPONSE_OBJ, id="broker-facts"),
    pytest.param(MULTIFETCH_RESPONSE_EMPTY_GOLDEN, MULTIFETCH_RESPONSE_EMPTY_OBJ, id="empty"),
]


def test_multifetch_response_golden_is_the_observed_bytes() -> None:
    g = MULTIFETCH_RESPONSE_GOLDEN
    assert g[:6].hex() == "0000006b0000"
    assert g[6:12].hex() == "000000350000" and g[12:63] == THREE_MESSAGES
    assert g[63:69].hex() == "000000200000" and g[69:99] == TWO_MESSAGES
    assert g[99:].hex() == "00000002000300000002" + "0001"


@pytest.mark.parametrize(("golden", "obj"), MULTIFETCH_RESPONSES)
def test_multifetch_response_encode(golden: bytes, obj: MultiFetchResponse) -> None:
    parts = [(p.error, p.messages) for p in obj.parts]
    assert wire.encode_multifetch_response(parts).hex() == golden.hex()


@pytest.mark.parametrize(("golden", "obj"), MULTIFETCH_RESPONSES)
def test_multifetch_response_decode(golden: bytes, obj: MultiFetchResponse) -> None:
    assert wire.frame_length(golden[:4]) == len(golden) - 4
    assert wire.decode_multifetch_response(golden[4:]) == obj
    assert wire.decode_multifetch_response(golden[4:], expected=len(obj.parts)) == obj
    for got, want in zip(
        wire.decode_multifetch_response(golden[4:]).parts, obj.parts, strict=True
    ):
        assert bytes(got.messages) == bytes(want.messages)


def test_multifetch_response_part_count_is_checked() -> None:
    with pytest.raises(ProtocolError, match="4 parts for 3 fetches"):
        wire.decode_multifetch_response(MULTIFETCH_RESPONSE_GOLDEN[4:], expected=3)
