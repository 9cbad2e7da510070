"""Golden tests of the later on-disk formats (kafka_pyspark._formats): bytes built by hand from
the layouts of docs/dev/PROTOCOL.md "Later on-disk formats" (tests/segment_builder.py, or literal
hex) decode to exact rows."""

from __future__ import annotations

import datetime as dt
import gzip
import struct
import zlib
from typing import Any

import lz4.frame
import pytest
from _fuzz import assert_deliberate
from segment_builder import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    batch,
    control_record,
    message,
    record,
    varint,
    wrapper,
)

from kafka_pyspark._formats import LOG_SCHEMA, decode_log, scan_log
from kafka_pyspark._formats.codecs import lz4_header_checksum, xxh32
from kafka_pyspark.errors import (
    CorruptMessageError,
    DecompressedSizeError,
    DecompressionError,
    InvalidMessageSizeError,
    MessageError,
    UnknownCodecError,
    UnknownMagicError,
)

T0 = 1_700_000_000_000
BATCH_HEADER_END = 61
UTC = dt.timezone.utc


def ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


def rows(data: bytes, **kw: Any) -> list[dict[str, Any]]:
    chunk = decode_log(data, **kw)
    assert chunk.batch.schema == LOG_SCHEMA
    got: list[dict[str, Any]] = chunk.batch.to_pylist()  # pyarrow ships no type hints
    return got


def row(offset: int, value: bytes | None, *, key: bytes | None = None, inner: int = 0,
        codec: str = "none", t: int | None = None, tt: int = -1,
        headers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"offset": offset, "next_offset": offset + 1, "inner_index": inner,
            "compression": codec, "value": value, "key": key,
            "timestamp": None if t is None else ts(t), "timestamp_type": tt, "headers": headers}


# --- record batches v2 ------------------------------------------------------------------------

# One uncompressed batch, written out field by field (kafka_pyspark/_formats/batch_layout.py): base
# offset 5, two records: (key "k", value "v1", header "h"="x") and (null key, null value, no
# headers).
GOLDEN_V2 = bytes.fromhex(
    "0000000000000005"  # baseOffset 5
    "00000046"  # batchLength 70: 49 bytes of header after this field + 21 of records
    "00000003"  # partitionLeaderEpoch 3 (not covered by the CRC)
    "02"  # magic 2
    "d825d11c"  # crc: CRC-32C of attributes .. end
    "0000"  # attributes: no codec, create time, not transactional, not control
    "00000001"  # lastOffsetDelta 1
    "0000018bcfe56800"  # baseTimestamp 1700000000000
    "0000018bcfe56800"  # maxTimestamp
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # records count 2
    # record 0: length 13 (zigzag 26), attributes 0, timestampDelta 0, offsetDelta 0,
    # keyLength 1 "k", valueLength 2 "v1", 1 header: key length 1 "h", value length 1 "x"
    "1a" "00" "00" "00" "02" "6b" "04" "7631" "02" "02" "68" "02" "78"
    # record 1: length 6, attributes 0, timestampDelta 2 (zigzag 4), offsetDelta 1 (2),
    # keyLength -1 (1), valueLength -1 (1), 0 headers
    "0c" "00" "04" "02" "01" "01" "00"
)


def test_golden_v2_literal_bytes() -> None:
    built = batch(5, [record(0, b"v1", key=b"k", headers=[("h", b"x")]),
                      record(1, None, timestamp_delta=2)], leader_epoch=3)
    assert built == GOLDEN_V2
    assert rows(GOLDEN_V2) == [
        row(5, b"v1", key=b"k", t=T0, tt=0, headers=[{"key": "h", "value": b"x"}]),
        row(6, None, inner=1, t=T0 + 2, tt=0, headers=[]),
    ]


RECORDS = [
    record(0, b"first", key=b"a"),
    record(1, None, key=b"b", timestamp_delta=10),
    record(2, b"", key=None, timestamp_delta=20, headers=[("h1", b"x"), ("h2", None)]),
    record(3, b"v" * 300, key=b"k" * 200, timestamp_delta=-5),
]


def expected(base: int, codec: str, *, log_append: bool = False) -> list[dict[str, Any]]:
    deltas = [0, 10, 20, -5]
    out = []
    for i, (value, key) in enumerate([(b"first", b"a"), (None, b"b"), (b"", None),
                                      (b"v" * 300, b"k" * 200)]):
        t = T0 + 99 if log_append else T0 + deltas[i]
        headers: list[dict[str, Any]] = (
            [{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}] if i == 2 else [])
        out.append(row(base + i, value, key=key, inner=i, codec=codec, t=t,
                       tt=1 if log_append else 0, headers=headers))
    return out


@pytest.mark.parametrize(("codec", "name"), [(NONE, "none"), (GZIP, "gzip"),
                                             (SNAPPY, "snappy"), (LZ4, "lz4"), (ZSTD, "zstd")])
def test_v2_every_codec(codec: int, name: str) -> None:
    data = batch(100, RECORDS, codec=codec) + batch(104, RECORDS, codec=codec)
    chunk = decode_log(data)
    assert chunk.batch.to_pylist() == expected(100, name) + expected(104, name)
    assert (chunk.bytes_consumed, chunk.entries, chunk.next_offset) == (len(data), 2, 108)
    assert chunk.partial_size is None and chunk.txn == [] and chunk.markers == []


def test_v2_log_append_time_takes_max_timestamp() -> None:
    data = batch(0, RECORDS, codec=LZ4, log_append=True, max_timestamp=T0 + 99)
    assert rows(data) == expected(0, "lz4", log_append=True)


def test_v2_control_and_transactional_batches() -> None:
    committed = batch(10, [record(0, b"c0"), record(1, b"c1")], transactional=True,
                      producer_id=7, producer_epoch=1, base_sequence=0)
    aborted = batch(12, [record(0, b"a0")], codec=GZIP, transactional=True, producer_id=8)
    commit = batch(13, [control_record(True)], transactional=True, control=True,
                   producer_id=7)
    abort = batch(14, [control_record(False)], transactional=True, control=True,
                  producer_id=8)
    plain = batch(15, [record(0, b"p")])
    data = committed + aborted + commit + abort + plain
    chunk = decode_log(data, base_position=1000)
    assert [r["value"] for r in chunk.batch.to_pylist()] == [b"c0", b"c1", b"a0", b"p"]
    assert [(t.position, t.producer_id, t.base_offset, t.last_offset, t.row_start, t.row_end)
            for t in chunk.txn] == [(1000, 7, 10, 11, 0, 2),
                                    (1000 + len(committed), 8, 12, 12, 2, 3)]
    at = 1000 + len(committed) + len(aborted)
    assert [(m.position, m.producer_id, m.offset, m.commit) for m in chunk.markers] == [
        (at, 7, 13, True), (at + len(commit), 8, 14, False)]
    assert chunk.next_offset == 16


def test_v2_empty_batch_after_compaction_has_no_rows() -> None:
    data = batch(0, [], last_offset_delta=4) + batch(5, [record(0, b"x")])
    chunk = decode_log(data)
    assert [r["offset"] for r in chunk.batch.to_pylist()] == [5]


def test_v2_crc32c_checked_and_leader_epoch_not_covered() -> None:
    good = batch(0, RECORDS)
    bad = bytearray(good)
    bad[-2] ^= 0x01  # the last byte of the last value (the header count 0 follows)
    with pytest.raises(CorruptMessageError, match="CRC-32C mismatch") as e:
        decode_log(bytes(bad), base_position=4096)
    assert e.value.offset == 4096
    epoch = bytearray(good)
    epoch[12:16] = struct.pack(">i", 99)  # partitionLeaderEpoch: outside the CRC
    assert rows(bytes(epoch)) == expected(0, "none")
    # verify_crc=False skips the check
    assert rows(bytes(bad), verify_crc=False)[3]["value"] == b"v" * 299 + b"w"


def _with_crc(entry: bytearray) -> bytes:
    import crc32c

    entry[17:21] = struct.pack(">I", crc32c.crc32c(bytes(entry[21:])))
    return bytes(entry)


def test_v2_corrupt_records_name_the_batch_position() -> None:
    good = batch(0, [record(0, b"abc"), record(1, b"def")])
    first = batch(0, [record(0, b"x")])
    # records count says 3 but there are 2
    bad = bytearray(good)
    bad[57:61] = struct.pack(">i", 3)
    with pytest.raises(CorruptMessageError, match="record 2 of 3: malformed or missing") as e:
        decode_log(first + _with_crc(bad))
    assert e.value.offset == len(first)
    # a value length past the record's end
    bad = bytearray(good)
    i = good.index(b"abc") - 1
    bad[i] = varint(50)[0]
    with pytest.raises(CorruptMessageError, match="record 0 of 2: value runs past") as e:
        decode_log(_with_crc(bad), base_position=10)
    assert e.value.offset == 10
    # unknown codec 6
    bad = bytearray(good)
    bad[22] = 6
    with pytest.raises(UnknownCodecError, match="unknown codec 6"):
        decode_log(_with_crc(bad))
    # a corrupt zstd payload
    bad = bytearray(batch(0, RECORDS, codec=ZSTD))
    bad[70:74] = b"\xff\xff\xff\xff"
    with pytest.raises(DecompressionError, match="zstd") as de:
        decode_log(_with_crc(bad), base_position=3)
    assert de.value.offset == 3


def test_v2_header_key_not_utf8_is_named_with_nothing_behind_it() -> None:
    data = batch(0, [record(0, b"a", headers=[("ok", b"1")]),
                     record(1, b"b", headers=[("h", b"2"), (b"\xff\xfe", b"3")])])
    with pytest.raises(CorruptMessageError,
                       match="record 1 of 2: bad header: header key is not UTF-8") as e:
        decode_log(data, base_position=5)
    assert e.value.offset == 5
    assert_deliberate(e.value)  # no ArrowInvalid / UnicodeDecodeError in its chain


def test_decompressed_size_is_bounded() -> None:
    data = batch(0, [record(0, b"\0" * 100_000)], codec=LZ4)
    with pytest.raises(DecompressedSizeError):
        decode_log(data, max_decompressed_size=50_000)
    assert len(rows(data, max_decompressed_size=200_000)[0]["value"]) == 100_000


# --- message sets v0/v1 ----------------------------------------------------------------------


def test_v0_plain_and_wrappers_with_absolute_inner_offsets() -> None:
    data = (
        message(0, b"m0", key=b"k0")
        + message(1, None)
        + wrapper(3, [message(2, b"g2"), message(3, b"g3", key=b"gk")], GZIP)
        + wrapper(5, [message(4, b"s4"), message(5, b"s5")], SNAPPY)
        + wrapper(6, [message(6, b"l6")], LZ4, kafka_3160=True)  # magic 0: pre-fix checksum
    )
    assert rows(data) == [
        row(0, b"m0", key=b"k0"),
        row(1, None),
        row(2, b"g2", codec="gzip"),
        row(3, b"g3", key=b"gk", inner=1, codec="gzip"),
        row(4, b"s4", codec="snappy"),
        row(5, b"s5", inner=1, codec="snappy"),
        row(6, b"l6", codec="lz4"),
    ]


@pytest.mark.parametrize("kafka_3160", [False, True])
def test_v1_relative_inner_offsets_timestamps_and_lz4_checksums(kafka_3160: bool) -> None:
    inner = [message(0, b"a", magic=1, timestamp=T0), message(1, b"b", key=b"k", magic=1,
                                                              timestamp=T0 + 1),
             message(2, None, magic=1, timestamp=-1)]
    data = (
        message(40, b"plain", magic=1, timestamp=T0 - 1)
        + wrapper(43, inner, LZ4, magic=1, timestamp=T0 + 5, kafka_3160=kafka_3160)
        + wrapper(46, inner, SNAPPY, magic=1, timestamp=T0 + 7, log_append=True)
    )
    assert rows(data) == [
        row(40, b"plain", t=T0 - 1, tt=0),
        row(41, b"a", codec="lz4", t=T0, tt=0),
        row(42, b"b", key=b"k", inner=1, codec="lz4", t=T0 + 1, tt=0),
        row(43, None, inner=2, codec="lz4", t=None, tt=0),
        row(44, b"a", codec="snappy", t=T0 + 7, tt=1),
        row(45, b"b", key=b"k", inner=1, codec="snappy", t=T0 + 7, tt=1),
        row(46, None, inner=2, codec="snappy", t=T0 + 7, tt=1),
    ]


def test_nested_wrappers_flatten_in_order() -> None:
    inner = wrapper(1, [message(0, b"x"), message(1, b"y")], SNAPPY)
    data = wrapper(2, [inner, message(2, b"z")], GZIP)
    assert [(r["offset"], r["inner_index"], r["compression"], r["value"])
            for r in rows(data)] == [(0, 0, "gzip", b"x"), (1, 1, "gzip", b"y"),
                                     (2, 2, "gzip", b"z")]


def test_legacy_corruption_names_position() -> None:
    good = message(0, b"abc") + message(1, b"def")
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    first = len(message(0, b"abc"))
    with pytest.raises(CorruptMessageError, match="logical offset 1: message CRC32") as e:
        decode_log(bytes(bad), base_position=100)
    assert e.value.offset == 100 + first
    assert str(e.value).endswith(f"(at offset {100 + first})")
    assert str(e.value).count("(at offset") == 1
    # an lz4 frame whose header checksum is neither the right one nor KAFKA-3160's
    lz = bytearray(wrapper(0, [message(0, b"x")], LZ4))
    hc = 12 + 4 + 2 + 4 + 4 + 6  # entry, CRC, magic+attributes, 2 lengths, LZ4 magic+FLG+BD
    lz[hc] ^= 0x55
    lz[12:16] = struct.pack(">I", zlib.crc32(bytes(lz[16:])))
    with pytest.raises(DecompressionError, match="header checksum"):
        decode_log(bytes(lz))
    # a gzip wrapper cut short inside
    gz = bytearray(message(0, gzip.compress(message(0, b"x"))[:-6], codec=GZIP))
    with pytest.raises(DecompressionError):
        decode_log(bytes(gz))


# --- the walk: mixed formats, tails, corruption --------------------------------------------


MIXED = (message(0, b"v0") + message(1, b"v1", magic=1, timestamp=T0)
         + batch(2, [record(0, b"r2"), record(1, b"r3")], codec=SNAPPY) + message(4, b"old"))


def test_mixed_formats_in_one_buffer() -> None:
    assert [(r["offset"], r["value"], r["timestamp_type"]) for r in rows(MIXED)] == [
        (0, b"v0", -1), (1, b"v1", 0), (2, b"r2", 0), (3, b"r3", 0), (4, b"old", -1)]


def test_every_prefix_decodes_whole_entries_only() -> None:
    sizes = [len(message(0, b"v0")), len(message(1, b"v1", magic=1, timestamp=T0)),
             len(batch(2, [record(0, b"r2"), record(1, b"r3")], codec=SNAPPY)),
             len(message(4, b"old"))]
    ends = [sum(sizes[: i + 1]) for i in range(4)]
    counts = [1, 2, 4, 5]
    for cut in range(len(MIXED) + 1):
        chunk = decode_log(MIXED[:cut])
        whole = [e for e in ends if e <= cut]
        assert chunk.bytes_consumed == (whole[-1] if whole else 0)
        assert chunk.batch.num_rows == (counts[len(whole) - 1] if whole else 0)
        if cut - chunk.bytes_consumed >= 12:
            assert chunk.partial_size == sizes[len(whole)]
        else:
            assert chunk.partial_size is None
    # trailing bytes after whole entries are a partial entry, never rows
    assert decode_log(MIXED + b"\0\0\0").bytes_consumed == len(MIXED)
    starts, end = scan_log(MIXED + MIXED[:20], base_position=7)
    assert starts.tolist() == [7 + e for e in [0, *ends[:-1]]] and end == 7 + len(MIXED)


def test_stop_at_is_a_file_position() -> None:
    first = len(message(0, b"v0"))
    chunk = decode_log(MIXED, base_position=50, stop_at=50 + first + 1)
    assert chunk.entries == 2 and chunk.bytes_consumed == first + len(
        message(1, b"v1", magic=1, timestamp=T0))


def test_walk_errors_name_position() -> None:
    bad_size = struct.pack(">qi", 0, 3) + b"\0" * 20
    with pytest.raises(InvalidMessageSizeError, match="SIZE 3") as e:
        decode_log(MIXED + bad_size, base_position=1)
    assert e.value.offset == 1 + len(MIXED)
    bad_magic = bytearray(message(9, b"x"))
    bad_magic[16] = 7
    with pytest.raises(UnknownMagicError, match="magic 7") as me:
        scan_log(bytes(bad_magic), base_position=5)
    assert me.value.offset == 5
    assert issubclass(UnknownMagicError, MessageError)


def test_xxh32_and_lz4_header_checksums() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    frame = lz4.frame.compress(b"abc", store_size=False)
    assert lz4_header_checksum(frame) == frame[6]
    assert lz4_header_checksum(frame, kafka_3160=True) == (xxh32(frame[:6]) >> 8) & 0xFF


def test_runs_of_equal_records_and_long_varints() -> None:
    # runs of one record size (confirmed in bulk) broken by other sizes, several batches
    sizes = [5] * 12 + [7] + [5] * 9 + [300] * 10 + [1, 2, 3] + [5] * 20
    values = [bytes([65 + i % 26]) * n for i, n in enumerate(sizes)]
    recs = [record(i, v, timestamp_delta=(-(1 << 40) if i == 13 else i)) for i, v in
            enumerate(values)]
    data = batch(0, recs[:30]) + batch(0, recs[30:], codec=GZIP) + batch(1000, recs[:16])
    got = rows(data)
    assert [r["value"] for r in got] == values + values[:16]
    assert [r["offset"] for r in got] == list(range(len(values))) + list(range(1000, 1016))
    assert got[13]["timestamp"] == ts(T0 - (1 << 40))
    # a length byte changed inside a run: record 7 claims one byte more than its body (the
    # first byte of record 8), so its fields end one byte before its end
    bad = bytearray(batch(0, [record(0, b"x" * 5)] * 12))
    i = BATCH_HEADER_END + 7 * len(record(0, b"x" * 5))
    bad[i] = varint(len(record(0, b"x" * 5)))[0]  # claims one byte more than its body
    with pytest.raises(CorruptMessageError, match="record 7 of 12: 1 bytes left after its"):
        decode_log(bytes(bad), verify_crc=False)


@pytest.mark.parametrize(("codec", "name"), [(GZIP, "gzip"), (SNAPPY, "snappy"), (LZ4, "lz4")])
@pytest.mark.parametrize("magic", [0, 1])
def test_every_legacy_codec_and_magic(codec: int, name: str, magic: int) -> None:
    stamp = T0 if magic else -1  # magic 0 has no TIMESTAMP field (the builders' default)
    inner = [message(i if magic else 10 + i, v, key=k, magic=magic, timestamp=stamp)
             for i, (v, k) in enumerate([(b"x", None), (None, b"k"), (b"", b"")])]
    data = (wrapper(12, inner, codec, magic=magic, timestamp=stamp)
            + message(13, b"after", magic=magic))
    tt = 0 if magic else -1  # magic 1: create time; magic 0: no timestamp
    assert [(r["offset"], r["inner_index"], r["compression"], r["value"], r["key"],
             r["timestamp_type"]) for r in rows(data)] == [
        (10, 0, name, b"x", None, tt),
        (11, 1, name, None, b"k", tt),
        (12, 2, name, b"", b"", tt),
        (13, 0, "none", b"after", None, tt),
    ]
