"""Exactly-once records (golden bytes by hand) and the read-back matcher (pure)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from kafka_pyspark._write.digest import LogUnit, SetDigest, set_digests
from kafka_pyspark._write.matcher import landed_prefix
from kafka_pyspark._write.records import (
    IntentWindow,
    RecordError,
    decode_done,
    decode_intent,
    encode_done,
    encode_intent,
)


def test_intent_golden_bytes() -> None:
    w = IntentWindow(starts={("t", 1, 2): 300}, sets={("t", 1, 2): [SetDigest(3, 48, 0xA1B2C3D4)]},
                     lists={"t": ((0, 0), (1, 2))})
    golden = bytes.fromhex(
        "01" "0001" "0001" "74" "00000002" "00000000" "00000000" "00000001" "00000002"
        "0001" "0001" "74" "00000001" "00000002" "000000000000012c" "00000001"
        "00000003" "0000000000000030" "a1b2c3d4")
    assert encode_intent(w) == golden
    assert decode_intent(golden) == w
    # several sets of a target: their entries back to back, in order
    w.sets[("t", 1, 2)] = [SetDigest(1, 2, 3), SetDigest(4, 5, 0xFFFFFFFF)]
    two = encode_intent(w)
    assert two[:len(golden) - 16] == golden[:-20] + bytes.fromhex("00000002")  # sets: 2
    assert two[len(golden) - 16:] == bytes.fromhex(
        "00000001" "0000000000000002" "00000003" "00000004" "0000000000000005" "ffffffff")
    assert decode_intent(two) == w


def test_set_digests_are_crc32_over_each_sets_big_endian_crcs() -> None:
    crcs = np.array([0x01020304, 0xA1B2C3D4, 0xFFFFFFFF, 0, 7], dtype=np.uint32)
    got = set_digests(crcs, [2, 0, 3], [40, 0, 61])
    assert got == [
        SetDigest(2, 40, zlib.crc32(bytes.fromhex("01020304" "a1b2c3d4"))),
        SetDigest(0, 0, 0),
        SetDigest(3, 61, zlib.crc32(bytes.fromhex("ffffffff" "00000000" "00000007"))),
    ]
    assert all(type(d) is SetDigest for d in got)
    assert got[2].digest == got[2][2] and got[0].inner_bytes == 40
    with pytest.raises(ValueError, match="5 CRCs"):
        set_digests(crcs, [2, 2], [40, 40])
    with pytest.raises(ValueError, match="5 CRCs"):
        set_digests(crcs, [2, 3], [40])


def test_done_golden_bytes() -> None:
    golden = bytes.fromhex("01" "0000000000000005" "0001" "0001" "74" "00000001" "00000000"
                           "0000000000000005" "0000000000000050" "00000001")
    assert encode_done(5, {("t", 1, 0): (5, 80, 1)}) == golden
    done = decode_done(golden)
    assert (done.rows, done.written) == (5, {("t", 1, 0): (5, 80, 1)})
    with pytest.raises(RecordError, match="truncated"):
        decode_done(golden[:-1])
    with pytest.raises(RecordError, match="too many"):
        decode_done(golden + b"\0")


def plain(crc: int, size: int = 16) -> LogUnit:
    return LogUnit(False, SetDigest(1, size, crc), 0)


def wrapper(d: SetDigest) -> LogUnit:
    return LogUnit(True, d, 0)


A, B, C = SetDigest(2, 40, 1), SetDigest(2, 40, 2), SetDigest(2, 40, 3)


def test_wrappers_in_order_with_others_between() -> None:
    other = wrapper(SetDigest(5, 99, 7))
    assert landed_prefix([A, B, C], [other, wrapper(A), other, wrapper(B)]) == 2
    assert landed_prefix([A, B, C], [wrapper(B), wrapper(C)]) == 0  # a prefix, in order
    assert landed_prefix([A, B], [wrapper(A), wrapper(B), wrapper(C)]) == 2


def test_uncompressed_runs() -> None:
    import zlib

    import numpy as np

    def run(crcs: list[int]) -> SetDigest:
        return SetDigest(len(crcs), 16 * len(crcs),
                         zlib.crc32(np.array(crcs, dtype=">u4").tobytes()))

    s1, s2 = run([10, 11]), run([12, 13, 14])
    log = [plain(99), plain(10), plain(11), plain(98, 20), plain(12), plain(13), plain(14)]
    assert landed_prefix([s1, s2], log) == 2
    assert landed_prefix([s1, s2], log[:6]) == 1  # the second set not (yet) readable
    assert landed_prefix([s1, s2], [plain(11), plain(10)]) == 0
    assert landed_prefix([], log) == 0
