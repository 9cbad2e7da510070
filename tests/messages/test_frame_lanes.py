"""The encode kernel's CRC fold lanes (``_messages/_frame.c``): their constants derived here from
the CRC-32 polynomial with Python integers, the fold and its reduction modelled here and checked
against zlib, and the lanes (on, where the CPU has them; off) writing exactly the messages built
here by hand with ``struct`` and ``zlib.crc32``: payloads of every length around a 16-byte block,
around the lanes' 2 KiB bound, short payloads at the very end of the data buffer, runs of fewer
rows than the lanes take, one huge row between small ones."""

from __future__ import annotations

import itertools
import random
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kafka_pyspark._messages import encode
from kafka_pyspark._messages.encode import encode_message_sets_arrow

FRAME_C = Path(encode.__file__).with_name("_frame.c")
FRAME_H = Path(encode.__file__).with_name("_frame.h")
P = 0x104C11DB7  # the CRC-32 polynomial, x^32 + x^26 + ... + 1, bit d the coefficient of x^d
M64 = (1 << 64) - 1


# --- the arithmetic, modelled -------------------------------------------------------------------

def _mod(a: int, m: int = P) -> int:
    while a.bit_length() >= m.bit_length():
        a ^= m << (a.bit_length() - m.bit_length())
    return a


def _div(a: int, m: int) -> int:
    q = 0
    while a.bit_length() >= m.bit_length():
        shift = a.bit_length() - m.bit_length()
        q |= 1 << shift
        a ^= m << shift
    return q


def _reflect(v: int, width: int) -> int:
    return int(format(v, f"0{width}b")[::-1], 2)


def _clmul(a: int, b: int) -> int:
    product = 0
    while b:
        if b & 1:
            product ^= a
        a, b = a << 1, b >> 1
    return product


CONSTANTS = {  # what each #define in _frame.c must be
    "FOLD_HI": _reflect(_mod(1 << 191), 64),
    "FOLD_LO": _reflect(_mod(1 << 127), 64),
    "END_96": _reflect(_mod(1 << 95), 64),
    "END_64": _reflect(_mod(1 << 63), 64),
    "BARRETT_MU": _reflect(_div(1 << 64, P), 33),
    "BARRETT_P": _reflect(P, 33),
}


def _fold(x: int, block: int) -> int:
    return _clmul(x & M64, CONSTANTS["FOLD_HI"]) ^ _clmul(x >> 64, CONSTANTS["FOLD_LO"]) ^ block


def _reduce(x: int) -> int:
    """_frame.c's reduce(): the register after the payload folded into x."""
    y = _clmul(x & M64, CONSTANTS["END_96"]) ^ ((x >> 64) << 32)
    z = (_clmul(y & M64, CONSTANTS["END_64"]) ^ (y & (M64 << 64))) >> 64
    q = _clmul(z & 0xFFFFFFFF, CONSTANTS["BARRETT_MU"]) & 0xFFFFFFFF
    return ((z ^ _clmul(q, CONSTANTS["BARRETT_P"])) >> 32) & 0xFFFFFFFF


def _lane_crc(payload: bytes) -> int:
    """A payload's CRC-32 as a lane computes it: zero-padded in front to whole blocks, folded
    from register 0, reduced, plus the CRC-32 of as many zero bytes."""
    if not payload:
        return 0
    padded = bytes(-len(payload) % 16) + payload
    x = int.from_bytes(padded[:16], "little")
    for at in range(16, len(padded), 16):
        x = _fold(x, int.from_bytes(padded[at : at + 16], "little"))
    return _reduce(x) ^ zlib.crc32(bytes(len(payload)))


def test_the_constants_are_the_polynomials() -> None:
    source = FRAME_C.read_text()
    for name, value in CONSTANTS.items():
        found = re.search(rf"#define {name} (0x[0-9a-f]+)ULL", source)
        assert found, name
        assert int(found.group(1), 16) == value, name


def test_the_model_is_zlibs_crc() -> None:
    rnd = random.Random(7)
    for size in [*range(0, 70), 255, 256, 257, 1000, 2048]:
        payload = rnd.randbytes(size)
        assert _lane_crc(payload) == zlib.crc32(payload), size


# --- the lanes, against messages built by hand ------------------------------------------------



def _bound(name: str) -> int:
    found = re.search(rf"#define {name} (\d+)", FRAME_H.read_text())
    assert found
    return int(found.group(1))


LANE_MAX, LANE_MIN_ROWS = _bound("KP_LANE_MAX"), _bound("KP_LANE_MIN_ROWS")


def _message(value: bytes, magic: int) -> bytes:
    crc = zlib.crc32(value)
    if magic == 1:
        return struct.pack(">iBBI", len(value) + 6, 1, 0, crc) + value
    return struct.pack(">iBI", len(value) + 5, 0, crc) + value


@pytest.fixture(params=["lanes", "per payload"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    kernel = encode._kernel
    if kernel is None:
        pytest.skip("the encode kernel is not built")
    was = kernel.frame_lanes(-1)
    if request.param == "lanes" and not kernel.frame_lanes(1):
        pytest.skip("this CPU has no AVX-512 carry-less multiply: the lanes stay off")
    if request.param == "per payload":
        kernel.frame_lanes(0)
    yield request.param
    kernel.frame_lanes(int(was))


def _check(values: list[bytes], magic: int = 1, offset: int = 0) -> None:
    """The values (after `offset` rows left out by a slice) as one uncompressed set and as sets
    cut here and there: each message exactly as built by hand, each CRC in crcs_out."""
    array = pa.array([b"x" * 3] * offset + values, pa.binary()).slice(offset)
    n = len(values)
    rnd = random.Random(n)
    for cuts in ([0, n], sorted({0, n, *(rnd.randrange(n + 1) for _ in range(4))})):
        crcs = np.zeros(n, np.uint32)
        sets = encode_message_sets_arrow(array, cuts, magic=magic, crcs_out=crcs)
        want = [b"".join(_message(v, magic) for v in values[a:b])
                for a, b in itertools.pairwise(cuts)]
        assert [bytes(s) for s in sets] == want
        assert crcs.tolist() == [zlib.crc32(v) for v in values]


@pytest.mark.parametrize("magic", [0, 1])
def test_every_length_around_a_block(engine: str, magic: int) -> None:
    rnd = random.Random(magic)
    values = [rnd.randbytes(size) for size in range(0, 80)] * 3
    rnd.shuffle(values)
    _check(values, magic)
    _check(values, magic, offset=5)


def test_every_length_the_lanes_take(engine: str) -> None:
    rnd = random.Random(2)
    values = [rnd.randbytes(size) for size in range(LANE_MAX + 17)]
    rnd.shuffle(values)
    _check(values)


def test_around_the_lanes_bound_and_huge_rows(engine: str) -> None:
    rnd = random.Random(3)
    sizes = [LANE_MAX - 1, LANE_MAX, LANE_MAX + 1, 4095, 4096, 70_000, 0, 1, 15, 16, 17]
    values = [rnd.randbytes(rnd.choice(sizes)) for _ in range(200)]
    _check(values)
    # one huge row takes a whole lane's share of the bytes: the other lanes get few rows or none
    small = [rnd.randbytes(rnd.randrange(0, 300)) for _ in range(60)]
    _check([*small[:30], rnd.randbytes(3_000_000), *small[30:]])
    _check([rnd.randbytes(3_000_000), *small])


def test_short_payloads_at_the_end_of_the_data(engine: str) -> None:
    """A payload under 16 bytes is read 16 bytes at a time where the data buffer goes on, and
    copied out first where it does not: the last rows of an array of exactly their bytes."""
    rnd = random.Random(4)
    for last in range(0, 17):
        values = [rnd.randbytes(rnd.randrange(0, 200)) for _ in range(40)] + [
            rnd.randbytes(last), rnd.randbytes(last % 5)]
        data = b"".join(values)
        offsets = np.cumsum([0, *map(len, values)]).astype(np.int32)
        array = pa.Array.from_buffers(pa.binary(), len(values),
                                      [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        assert array.buffers()[2].size == len(data)
        _check(array.to_pylist())
        sets = encode_message_sets_arrow(array, [0, len(values)])
        assert bytes(sets[0]) == b"".join(_message(v, 1) for v in values)


def test_runs_shorter_than_the_lanes_take(engine: str) -> None:
    rnd = random.Random(5)
    for n in range(0, LANE_MIN_ROWS + 3):
        _check([rnd.randbytes(rnd.randrange(0, 500)) for _ in range(n)])


def test_random_mixes_both_engines_agree() -> None:
    kernel = encode._kernel
    if kernel is None:
        pytest.skip("the encode kernel is not built")
    was = kernel.frame_lanes(-1)
    rnd = random.Random(6)
    try:
        for trial in range(200):
            values = [rnd.randbytes(rnd.choice([rnd.randrange(0, 40), rnd.randrange(0, 600),
                                                rnd.randrange(2000, 2100)]))
                      for _ in range(rnd.randrange(0, 300))]
            array = pa.array(values, pa.binary())
            cuts = sorted({0, len(values), *(rnd.randrange(len(values) + 1) for _ in range(3))})
            outs = []
            for on in (1, 0):
                kernel.frame_lanes(on)
                for codec in ("none", "snappy"):
                    crcs = np.zeros(len(values), np.uint32)
                    sets = encode_message_sets_arrow(array, cuts, compression=codec,
                                                     magic=trial % 2, crcs_out=crcs)
                    outs.append(([bytes(s) for s in sets], crcs.tolist()))
            assert outs[:2] == outs[2:]
            assert outs[0][1] == [zlib.crc32(v) for v in values]
    finally:
        kernel.frame_lanes(int(was))
