"""The gzip lane (``_messages/_gzip.c``, libdeflate, linked in): whole fetches of gzip wrappers
checked, inflated and taken in one call. It must give exactly what the general path gives (and
what the ISA-L path of ``flat`` gives when the module is not built), decide no error itself (a
doubtful wrapper stops it: the general path raises the exact error) and never trust a length.

Gzip members are written by hand here (RFC 1952 header, a stored deflate block, CRC32 and
ISIZE trailer) or by the stdlib's ``gzip`` (``_bytes.gzip_wrapper``), never by the encoder
under test.
"""

from __future__ import annotations

import gzip
import random
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _bytes import message, message_set
from _outcome import outcome

from kafka_pyspark._messages import decode, decode_message_set, flat, walk
from kafka_pyspark._messages.crc import crc32
from kafka_pyspark._shared.native import pure_forced
from kafka_pyspark.errors import DecompressionError, MessageError

LANE = flat.gzip_lane
needs_lane = pytest.mark.skipif(LANE is None, reason="the gzip lane (_gzip) is not built")
END, WRAPPER, BAD_CRC, BAD_GZIP = 0, 7, 10, 11
LIMIT = 1 << 20

# LENGTH 8, MAGIC 1, ATTRIBUTES 0, CRC32("hi"), "hi"; then magic 0, "abc"
HI = bytes.fromhex("00000008" "01" "00" "d8932aac") + b"hi"
ABC = bytes.fromhex("00000008" "00" "352441c2") + b"abc"
HEADER = bytes.fromhex("1f8b" "08" "00" "00000000" "00" "ff")  # deflate, no flags, Java's shape


def stored(data: bytes, *, header: bytes = HEADER, isize: int | None = None,
           crc: int | None = None) -> bytes:
    """One gzip member holding ``data`` in one stored deflate block (BFINAL 1, BTYPE 00)."""
    block = b"\x01" + struct.pack("<HH", len(data), 0xFFFF ^ len(data)) + data
    trailer = struct.pack("<II", zlib.crc32(data) if crc is None else crc,
                          len(data) if isize is None else isize)
    return header + block + trailer


def wrapper(payload: bytes) -> bytes:
    return message(payload, codec=1)


@pytest.fixture
def lanes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records, per decode call, which lane gave the result: "gzip" (this one), "flat" (the
    fast lane without it) or "general"; and "stepped aside" when this one was tried first."""
    taken: list[str] = []
    fetch, fast = flat._gzip_fetch, decode._decode_flat
    tried: list[bool] = []

    def spy_fetch(*args: Any) -> Any:
        result = fetch(*args)
        tried.append(result is not None)
        return result

    def spy_fast(*args: Any) -> Any:
        tried.clear()
        result = fast(*args)
        if tried and not tried[0]:
            taken.append("stepped aside")
        taken.append("general" if result is None else "gzip" if tried and tried[0] else "flat")
        return result

    monkeypatch.setattr(flat, "_gzip_fetch", spy_fetch)
    monkeypatch.setattr(decode, "_decode_flat", spy_fast)
    yield taken


def all_paths(data: bytes, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, ...]:
    """The outcome with the gzip lane; the same without it (ISA-L) and on the general path."""
    result = outcome(data, **kw)
    with monkeypatch.context() as m:
        m.setattr(flat, "gzip_lane", None)
        assert outcome(data, **kw) == result
        m.setattr(walk, "kernel", None)
        assert outcome(data, **kw) == result
    return result


def test_the_lane_loads_where_it_can_be_built() -> None:
    """The module is optional, so a build that fails is silent: where libdeflate's header is
    installed (or the module is there) it must load."""
    if pure_forced() or walk.kernel is None:
        pytest.skip("the pure-Python path is in use")
    header = any(Path(d, "libdeflate.h").exists() for d in ("/usr/include", "/usr/local/include"))
    if not header and not list(Path(flat.__file__).parent.glob("_gzip.*")):
        pytest.skip("libdeflate is not installed: the gzip lane (_gzip) is not built")
    assert LANE is not None and LANE.LIBDEFLATE


@needs_lane
@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd")
def test_the_module_needs_no_libdeflate_at_run_time() -> None:
    assert LANE is not None and LANE.__file__ is not None
    linked = subprocess.run(["ldd", LANE.__file__], capture_output=True, text=True, check=True)
    assert "libdeflate" not in linked.stdout


@needs_lane
def test_golden_member_and_inflate() -> None:
    assert LANE is not None
    payload = stored(HI + ABC)
    out = bytearray(64)
    assert LANE.inflate(payload, out) == 24 and bytes(out[:24]) == HI + ABC
    for bad in (payload + b"\x00", payload[:-1], b"", stored(HI + ABC, crc=0)):
        with pytest.raises(ValueError):
            LANE.inflate(bad, out)
    with pytest.raises(ValueError):  # no room
        LANE.inflate(payload, bytearray(23))


CRCS = [walk.CRC_LIBDEFLATE, zlib.crc32]  # libdeflate's CRC-32 in C, or a callable's


def fetch(data: bytes, size: int = 256, rows: int = 16, limit: int = LIMIT,
          verify: bool = True) -> tuple[Any, ...]:
    """gzip_fetch of the wrappers of ``data`` into a fresh sink, with each CRC engine (both
    must give the same)."""
    assert LANE is not None
    scan = walk.scan(memoryview(data), 0, len(data), len(data))
    results = []
    for crc in CRCS:
        out, offsets = np.zeros(size, np.uint8), np.zeros(rows + 1, np.int32)
        words, counts = np.zeros(rows, np.uint32), np.zeros(len(scan.recs), np.int64)
        r = LANE.gzip_fetch(data, scan.recs, out, 0, offsets, words, 0, counts, verify, limit,
                            crc)
        results.append((*r, bytes(out[: r[2]]), offsets[: r[3] + 1].tolist(), counts.tolist()))
    assert results[0] == results[1]
    return results[0]


@needs_lane
def test_fetch_golden() -> None:
    data = wrapper(stored(HI + ABC)) + wrapper(stored(ABC))
    assert fetch(data) == (END, 2, 8, 3, b"hiabcabc", [0, 2, 5, 8], [2, 1])
    assert LANE is not None
    scan = walk.scan(memoryview(data), 0, len(data), len(data))
    assert LANE.gzip_total(data, scan.recs, LIMIT) == 24 + 12
    assert LANE.gzip_total(data, scan.recs, 23) == -1  # a wrapper past the budget


@needs_lane
def test_fetch_stops_at_what_it_does_not_decide() -> None:
    good = wrapper(stored(HI))
    inner = HI + ABC
    fname = bytes.fromhex("1f8b" "08" "08" "00000000" "00" "ff") + b"name\x00"
    nested = message(stored(wrapper(stored(HI))), codec=1)
    for second, status in [
        (wrapper(stored(inner[:5]) + stored(inner[5:])), BAD_GZIP),  # two members
        (wrapper(stored(inner) + b"\x00junk"), BAD_GZIP),  # bytes after the member
        (wrapper(stored(inner, isize=23)), BAD_GZIP),  # ISIZE lies (libdeflate checks it)
        (wrapper(stored(inner, isize=25)), BAD_GZIP),
        (wrapper(stored(inner, isize=0)), BAD_GZIP),
        (wrapper(stored(inner, isize=(1 << 32) - 1)), BAD_GZIP),
        (wrapper(stored(inner, crc=0)), BAD_GZIP),  # the member's own CRC
        (wrapper(stored(inner, header=fname)), BAD_GZIP),  # a header field: general path
        (wrapper(stored(inner)[:-1]), BAD_GZIP),  # cut off
        (wrapper(stored(inner, header=HEADER[:2] + b"\x07" + HEADER[3:])), BAD_GZIP),
        (message(stored(inner), codec=1, crc=1), BAD_CRC),  # the wrapper's CRC
        (wrapper(stored(HI + message(b"abc", crc=1))), BAD_CRC),  # an inner message's CRC
        (wrapper(stored(HI + ABC[:-1])), walk.PARTIAL),  # the inner set cut off
        (nested, WRAPPER),
        (message(stored(inner), codec=2), BAD_GZIP),  # snappy
        (wrapper(b"\x1f\x8b"), BAD_GZIP),
    ]:
        status_, i, *_ = fetch(good + second)
        assert (status_, i) == (status, 1), second.hex()
    assert fetch(wrapper(stored(HI + message(b"abc", crc=1))), verify=False)[:2] == (END, 1)
    assert fetch(good + wrapper(stored(inner)), size=20)[:2] == (BAD_GZIP, 1)  # no room
    assert fetch(good + wrapper(stored(inner)), limit=23)[:2] == (BAD_GZIP, 1)  # budget


@needs_lane
def test_fetch_guards() -> None:
    assert LANE is not None
    data = wrapper(stored(HI)) * 2
    scan = walk.scan(memoryview(data), 0, len(data), len(data))
    out, offsets, words = np.zeros(64, np.uint8), np.zeros(9, np.int32), np.zeros(8, np.uint32)
    counts = np.zeros(2, np.int64)
    args = (True, LIMIT, walk.CRC_LIBDEFLATE)
    with pytest.raises(ValueError):
        LANE.gzip_fetch(data, scan.recs, out, 0, offsets, words, 0, counts[:1], *args)
    for dpos, k in [(-1, 0), (65, 0), (0, -1), (0, 9)]:
        with pytest.raises(ValueError):
            LANE.gzip_fetch(data, scan.recs, out, dpos, offsets, words, k, counts, *args)
    for not_an_engine in (0, 3, None, True, "crc32"):  # True is 1, but no engine id
        with pytest.raises(TypeError):
            LANE.gzip_fetch(data, scan.recs, out, 0, offsets, words, 0, counts, True, LIMIT,
                            not_an_engine)

    def failing(data: Any, value: int = 0) -> int:
        raise RuntimeError("crc")

    with pytest.raises(RuntimeError):  # the callable's error, not a status
        LANE.gzip_fetch(data, scan.recs, out, 0, offsets, words, 0, counts, True, LIMIT, failing)
    recs = scan.recs.copy()
    for start in (len(data) - 5, len(data) + 1, (1 << 63) - 1, -1):
        recs["start"][1] = start  # a record pointing past the buffer (or overflowing)
        assert LANE.gzip_total(data, recs, LIMIT) == -1
        r = LANE.gzip_fetch(data, recs, out, 0, offsets, words, 0, counts, *args)
        assert r[:2] == (BAD_GZIP, 1)
    # rows: one row of room left for two
    r = LANE.gzip_fetch(data, scan.recs, out, 0, offsets[:2], words, 0, counts, *args)
    assert r[0] == 8  # the kernel's ST_FULL


@needs_lane
def test_lane_agrees_with_both_other_paths(monkeypatch: pytest.MonkeyPatch,
                                           lanes: list[str]) -> None:
    values = [b"", b"a", b"hello", bytes(300), b"x" * 5000]
    inner = message_set(values)
    # name: (set, the lanes its decode takes, whether it decodes); "flat": the fast lane on ISA-L
    # when this one does not even start (bytes after the member make its ISIZE no hint)
    aside = ["stepped aside", "general"]
    sets = {
        "stdlib gzip": (wrapper(gzip.compress(inner, mtime=0)) * 3, ["gzip"], True),
        "hand-built": (wrapper(stored(HI + ABC)) + wrapper(stored(ABC)), ["gzip"], True),
        "empty inner set": (wrapper(stored(b"")) + wrapper(stored(HI)), ["gzip"], True),
        "a partial last wrapper": ((wrapper(stored(HI)) * 2)[:-3], ["gzip"], True),
        "two members": (wrapper(stored(inner[:20]) + stored(inner[20:])), aside, True),
        "trailing bytes": (wrapper(stored(inner) + b"\x00junk"), ["flat"], True),
        "lying ISIZE": (wrapper(stored(inner, isize=len(inner) + 1)), aside, False),
        "huge ISIZE": (wrapper(stored(inner, isize=(1 << 32) - 1)), ["general"], False),
        "bad inner CRC": (wrapper(stored(HI + message(b"abc", crc=1))), aside, False),
        "bad wrapper CRC": (message(stored(HI), codec=1, crc=1), aside, False),
    }
    for name, (data, expected, decodes) in sets.items():
        lanes.clear()
        outcome(data)
        assert lanes == expected, name
        result = all_paths(data, monkeypatch)
        assert isinstance(result[0], dict) == decodes, name
    assert all_paths(wrapper(stored(HI + message(b"abc", crc=1))), monkeypatch,
                     verify_crc=False)[0]["value"] == [b"hi", b"abc"]
    rows = all_paths(sets["empty inner set"][0], monkeypatch)[0]
    assert rows["value"] == [b"hi"] and rows["offset"] == [1000 + len(wrapper(stored(b"")))]
    for limit in (0, 23, 24):
        all_paths(sets["hand-built"][0], monkeypatch, max_decompressed_size=limit)


@needs_lane
def test_values_of_several_fetches_share_a_sink(monkeypatch: pytest.MonkeyPatch,
                                                lanes: list[str]) -> None:
    sink = flat.ValueSink(1 << 16, 1024)
    first = wrapper(gzip.compress(message_set([b"a" * 100] * 30), mtime=0))
    second = wrapper(stored(HI + ABC))
    a = decode_message_set(first, 0, sink=sink).batch.column("value")
    bad = message(stored(HI), codec=1, crc=1)  # stops the lane after it wrote into the sink
    with pytest.raises(MessageError):
        decode_message_set(second + bad, 0, sink=sink)
    b = decode_message_set(second, 0, sink=sink).batch.column("value")
    assert lanes == ["gzip", "stepped aside", "general", "gzip"]
    joined = flat.join_views([a, b])
    assert joined is not None and joined.to_pylist() == [b"a" * 100] * 30 + [b"hi", b"abc"]


def random_gzip_set(rnd: random.Random) -> bytes:
    parts = []
    for _ in range(rnd.randrange(1, 8)):
        values = [rnd.randbytes(rnd.choice([0, 3, 40, 400])) for _ in range(rnd.randrange(0, 30))]
        inner = b"".join(message(v, magic=rnd.choice([0, 1])) for v in values)
        payload = (gzip.compress(inner, compresslevel=rnd.choice([1, 6, 9]), mtime=0)
                   if rnd.random() < 0.8 else stored(inner))
        parts.append(wrapper(payload))
    data = bytearray(b"".join(parts))
    for _ in range(rnd.randrange(0, 3)):  # corruption anywhere: headers, members, trailers
        at = rnd.randrange(len(data))
        if rnd.random() < 0.7:
            data[at] ^= 1 << rnd.randrange(8)
        else:
            del data[at:]
    return bytes(data)


@needs_lane
@pytest.mark.parametrize("seed", range(60))
def test_random_gzip_sets_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    # ISA-L's CRC-32 called directly (flat's choice here), libdeflate's, ISA-L's called back
    monkeypatch.setattr(flat, "_GZIP_CRC", [walk.CRC_ISAL, walk.CRC_LIBDEFLATE, crc32][seed % 3])
    kw: dict[str, Any] = {"verify_crc": rnd.random() < 0.8}
    if rnd.random() < 0.3:
        kw["max_decompressed_size"] = rnd.randrange(0, 20000)
    all_paths(random_gzip_set(rnd), monkeypatch, **kw)


# --- deflate streams at the edges of RFC 1951 -------------------------------------------------
# written bit by bit here: a dynamic block (BTYPE 2) whose code-length code gives each of the
# lengths 0..15 a 4-bit code (a complete code), then the literals of the data and end-of-block


class Bits:
    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = self.n = 0

    def put(self, value: int, count: int) -> None:  # header fields: least significant bit first
        self.acc |= value << self.n
        self.n += count
        while self.n >= 8:
            self.out.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8

    def code(self, code: int, length: int) -> None:  # Huffman codes: most significant bit first
        for i in reversed(range(length)):
            self.put((code >> i) & 1, 1)

    def done(self) -> bytes:
        return bytes(self.out) + (bytes([self.acc]) if self.n else b"")


def canonical(lengths: list[int]) -> list[int]:
    """RFC 1951 3.2.2: the codes of a canonical Huffman code with these lengths."""
    codes, code = [0] * len(lengths), 0
    for length in range(1, 16):
        for sym, n in enumerate(lengths):
            if n == length:
                codes[sym] = code
                code += 1
        code <<= 1
    return codes


CL_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
LITS = [9] * 256 + [6] * 28 + [5] * 2  # 286 lit/len codes: 1/2 + 28/64 + 2/32, complete


def dynamic(data: bytes, lits: list[int], dists: list[int], *, final: int = 1,
            cl: list[int] | None = None, lengths: list[tuple[int, int, int]] | None = None,
            ) -> bytes:
    """One dynamic block of ``data``'s literals. ``lengths``: the code-length symbols (symbol,
    extra bits, their count), by default each length once."""
    cl = cl or [4] * 16 + [0] * 3
    b = Bits()
    b.put(final, 1)
    b.put(2, 2)
    b.put(len(lits) - 257, 5)
    b.put(len(dists) - 1, 5)
    b.put(19 - 4, 4)
    for sym in CL_ORDER:
        b.put(cl[sym], 3)
    cl_codes = canonical(cl)
    for sym, extra, count in lengths or [(n, 0, 0) for n in lits + dists]:
        b.code(cl_codes[sym], cl[sym])
        b.put(extra, count)
    codes = canonical(lits)
    for byte in data:
        b.code(codes[byte], lits[byte])
    b.code(codes[256], lits[256])
    return b.done()


def member(raw: bytes, data: bytes) -> bytes:
    return HEADER + raw + struct.pack("<II", zlib.crc32(data), len(data))


EDGES = {  # name: (deflate stream of HI + ABC, whether the lane takes it)
    "dynamic, complete codes": (dynamic(HI + ABC, LITS, [1, 1]), True),
    "287 lit/len codes": (dynamic(HI + ABC, [9] * 256 + [6] * 30 + [5], [1, 1]), False),
    "288 lit/len codes": (dynamic(HI + ABC, [9] * 256 + [6] * 32, [1, 1]), False),
    "31 distance codes": (dynamic(HI + ABC, LITS, [5] * 30 + [4]), False),
    "a repeat past the lengths": (dynamic(HI + ABC, LITS, [1, 1], cl=[4] * 15 + [0, 0, 4, 0],
                                          lengths=[(n, 0, 0) for n in LITS] + [(1, 0, 0),
                                                                                (17, 7, 3)]),
                                  False),
    "an incomplete code-length code": (dynamic(HI + ABC, LITS, [1, 1], cl=[4] * 15 + [0] * 4),
                                       False),
    "an incomplete lit/len code": (dynamic(HI + ABC, [10, *LITS[1:]], [1, 1]), False),
    "not the final block": (dynamic(HI + ABC, LITS, [1, 1], final=0) + b"\x03\x00", False),
}


@needs_lane
@pytest.mark.parametrize("name", EDGES)
def test_deflate_edges(name: str, monkeypatch: pytest.MonkeyPatch, lanes: list[str]) -> None:
    raw, lane = EDGES[name]
    data = wrapper(member(raw, HI + ABC))
    outcome(data)
    assert lanes[0] == ("gzip" if lane else "stepped aside")
    all_paths(data, monkeypatch)  # zlib and ISA-L refuse some: so must this lane


@needs_lane
def test_several_deflate_blocks_take_the_isal_path_not_the_general_one(
        monkeypatch: pytest.MonkeyPatch, lanes: list[str]) -> None:
    """A member of several deflate blocks (zlib with memLevel 1 closes one per 128 symbols;
    zlib does so per ~16K at the default) is not this lane's: the fast lane's ISA-L path takes
    the whole fetch, not the general path."""
    inner = message_set([bytes([i]) * (i * 7 % 300) + b"%d" % i for i in range(60)])
    deflater = zlib.compressobj(6, zlib.DEFLATED, 31, 1)
    member = deflater.compress(inner) + deflater.flush()
    data = wrapper(gzip.compress(inner, mtime=0)) + wrapper(member)
    assert zlib.decompress(member, 31) == inner
    outcome(data)
    assert lanes == ["stepped aside", "flat"]
    rows = all_paths(data, monkeypatch)[0]
    assert len(rows["value"]) == 120 and rows["value"][60:] == rows["value"][:60]


def fixed(literals: bytes, length_symbol: int, distance_code: int = 0) -> bytes:
    """One fixed block (BTYPE 1, RFC 1951 3.2.6): ``literals``, then ``length_symbol`` (no
    extra bits: 257..264 or 285..287) at ``distance_code`` (no extra bits: 0..3), then
    end-of-block."""
    b = Bits()
    b.put(1, 1)
    b.put(1, 2)
    for sym in [*literals, length_symbol]:
        if sym < 144:
            b.code(0x30 + sym, 8)
        elif sym < 256:
            b.code(0x190 + sym - 144, 9)
        else:
            b.code(0xC0 + sym - 280, 8) if sym >= 280 else b.code(sym - 256, 7)
    b.code(distance_code, 5)
    b.code(0, 7)  # end-of-block (256)
    return b.done()


@needs_lane
@pytest.mark.parametrize(("symbol", "lane"), [(285, True), (286, False), (287, False)])
def test_fixed_block_symbols(symbol: int, lane: bool, monkeypatch: pytest.MonkeyPatch,
                             lanes: list[str]) -> None:
    """The fixed code has lit/len codes 286 and 287: zlib and ISA-L refuse them, libdeflate
    reads them as length 258 (as 285). The lane must not decode what the general path refuses."""
    inner = message(b"a" * 259)
    data = wrapper(member(fixed(inner[:-258], symbol), inner))
    outcome(data)
    assert lanes[0] == ("gzip" if lane else "stepped aside")
    result = all_paths(data, monkeypatch)
    assert (result[0]["value"] == [b"a" * 259]) if lane else result[0] is DecompressionError


@needs_lane
def test_the_lane_calls_isal_crc_directly_where_the_kernel_found_it() -> None:
    assert LANE is not None
    assert flat._SNAPPY_CRC == walk.CRC_ISAL  # the kernel was given ISA-L's crc32_gzip_refl
    assert flat._GZIP_CRC == walk.CRC_ISAL
    data = wrapper(stored(HI + ABC)) + wrapper(stored(HI + message(b"abc", crc=1)))
    recs = walk.scan(memoryview(data), 0, len(data), len(data)).recs
    for engine in (walk.CRC_ISAL, walk.CRC_LIBDEFLATE, crc32):
        out = np.zeros(64, dtype=np.uint8)
        offsets = np.zeros(8, dtype=np.int32)
        words = np.zeros(8, dtype=np.uint32)
        counts = np.zeros(2, dtype=np.int64)
        status, i = LANE.gzip_fetch(data, recs, out, 0, offsets, words, 0, counts, True,
                                    LIMIT, engine)[:2]
        assert (status, i, counts[0]) == (BAD_CRC, 1, 2), engine  # the second one's inner CRC
        assert bytes(out[:5]) == b"hiabc"
