"""The compiled encode pass (``_messages/_encode.c``) against its pure-Python twin: the same
bytes for uncompressed and snappy sets (snappy blocks byte for byte what cramjam writes), the
same messages for gzip, the same CRCs, the same errors. Also its C entry point on arguments
encode.py would never pass (it checks them itself)."""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from _encoded import assert_same_sets, decoded

from kafka_pyspark._messages import compression, encode
from kafka_pyspark._messages.encode import encode_message_sets_arrow
from kafka_pyspark.errors import MessageError, MessageTooLargeError

pytestmark = pytest.mark.skipif(encode.ENGINE != "kernel", reason="the encode kernel is not built")


def _json_like(rnd: random.Random, i: int) -> bytes:
    name = "".join(rnd.choice("abcdefgh") for _ in range(rnd.randrange(3, 12)))
    tags = ",".join(f'"t{rnd.randrange(40)}"' for _ in range(rnd.randrange(0, 8)))
    return f'{{"id":{i},"user":"{name}","score":{rnd.random():.5f},"tags":[{tags}]}}'.encode()


MAKERS: dict[str, Callable[[random.Random, int], bytes]] = {
    "random": lambda r, i: r.randbytes(r.randrange(0, 400)),
    "json": _json_like,
    "runs": lambda r, i: bytes([r.randrange(3)]) * r.randrange(0, 3000),
    "two_letters": lambda r, i: bytes(r.choice(b"ab") for _ in range(r.randrange(0, 200))),
    "empty": lambda r, i: b"",
}


def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encode, "_kernel", None)


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("codec", ["none", "snappy", "gzip"])
@pytest.mark.parametrize("magic", [0, 1])
def test_kernel_matches_pure_twin(
    kind: str, codec: str, magic: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rnd = random.Random(f"{kind}{codec}{magic}")
    values = [MAKERS[kind](rnd, i) for i in range(rnd.randrange(300, 700))]
    array = pa.array([b"skip", *values], pa.binary()).slice(1)
    n = len(values)
    cuts = [*sorted({0, n, *(rnd.randrange(n + 1) for _ in range(6))}), n]  # an empty last set
    crcs = np.zeros(n, np.uint32)
    got = encode_message_sets_arrow(array, cuts, compression=codec, magic=magic, crcs_out=crcs)
    assert all(isinstance(g, memoryview) for g in got)
    with monkeypatch.context() as m:
        _pure(m)
        pure_crcs = np.zeros(n, np.uint32)
        want = encode_message_sets_arrow(array, cuts, compression=codec, magic=magic,
                                         crcs_out=pure_crcs)
    assert all(isinstance(w, bytes) for w in want)
    assert_same_sets(got, want, codec)
    assert crcs.tolist() == pure_crcs.tolist() == [zlib.crc32(v) for v in values]
    for data, a, b in zip(got, cuts, cuts[1:], strict=False):
        if a < b:
            assert decoded(data)["value"] == values[a:b]


def test_snappy_blocks_are_cramjams() -> None:
    """Inputs of one and several 32 KiB blocks, incompressible and not: the wrapper payload is
    exactly the pure path's (header, then cramjam's raw block per 32 KiB)."""
    rnd = random.Random(5)
    for size in (1, 16, 17, 100, 32 * 1024 - 10, 32 * 1024 + 1, 200_000):
        for value in (rnd.randbytes(size), (b"abcdefgh" * size)[:size], bytes(size)):
            got = encode_message_sets_arrow(pa.array([value]), [0, 1], compression="snappy")[0]
            inner = encode.encode_message(value)
            assert bytes(got[10:]) == compression.snappy_compress(inner)


@pytest.mark.parametrize("level", range(10))
def test_gzip_levels_decode(level: int) -> None:
    rnd = random.Random(level)
    values = [_json_like(rnd, i) for i in range(400)]
    got = encode_message_sets_arrow(pa.array(values), [0, 150, 400], compression="gzip",
                                    level=level)
    for data, part in zip(got, (values[:150], values[150:]), strict=True):
        assert decoded(data)["value"] == part
        member = bytes(data[10:])
        assert compression.gzip_decompress(member, 1 << 20) == encode.encode_message_set(part)


def test_the_default_level_is_zlibs_6_and_level_7_is_no_larger_than_zlib() -> None:
    """The documented trade: by default libdeflate's 6 (Java's level), within 2% of zlib's 6
    on JSON-like values; at 7, no larger than zlib's 6."""
    assert encode.GZIP_DEFAULT_LEVEL == compression.GZIP_LEVEL == 6
    rnd = random.Random(11)
    values = [_json_like(rnd, i) for i in range(20_000)]
    cuts = list(range(0, 20_001, 200))

    def ours(level: int | None) -> int:
        return sum(map(len, encode_message_sets_arrow(pa.array(values), cuts,
                                                      compression="gzip", level=level)))

    zlib6 = sum(
        len(compression.gzip_compress(encode.encode_message_set(values[a:b]), 6)) + 10
        for a, b in itertools.pairwise(cuts)
    )
    assert ours(None) == ours(6)
    assert ours(6) <= zlib6 * 1.02
    assert ours(7) <= zlib6


def test_errors_as_the_pure_path(monkeypatch: pytest.MonkeyPatch) -> None:
    array = pa.array([b"a", b"b", None, b"d"])
    texts = []
    for pure in (False, True):
        with monkeypatch.context() as m:
            if pure:
                _pure(m)
            with pytest.raises(MessageError) as info:
                encode_message_sets_arrow(array, [1, 2, 4], compression="snappy")
            texts.append(str(info.value))
    assert texts[0] == texts[1] == "value at index 2 is null: a 0.7 message cannot be null"


def _raised(pure: bool, monkeypatch: pytest.MonkeyPatch, array: pa.Array, cuts: list[int],
            **kwargs: object) -> tuple[type, str]:
    with monkeypatch.context() as m:
        if pure:
            _pure(m)
        with pytest.raises((ValueError, MessageError)) as info:
            encode_message_sets_arrow(array, cuts, **kwargs)  # type: ignore[arg-type]
    return type(info.value), str(info.value)


def test_several_faults_raise_the_pure_paths_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel path leaves the cuts' order and the payload sizes to the kernel's own checks:
    whatever else is wrong too, the error is the one the pure path raises first."""
    nulls = pa.array([b"a", None, b"c", b"d"])
    fine = pa.array([b"a", b"b", b"c", b"d"])
    cases: list[tuple[pa.Array, list[int], dict[str, object]]] = [
        (nulls, [0, 3, 2, 4], {}),  # out of order, and a null
        (nulls, [0, 1, 4], {}),  # a null only
        (fine, [3, 1], {}),  # last before first
        (fine, [0, 3, 2, 9], {}),  # out of order and out of range
        (fine, [-1, 2], {}),  # out of range only
        (fine, [0, 3, 2, 4], {"crcs_out": np.zeros(1, np.uint32)}),  # order, and crcs_out
        (fine, [0, 2, 4], {"crcs_out": np.zeros(1, np.uint32)}),  # crcs_out only
        (fine, [0, 3, 2, 4], {"compression": "snappy"}),
    ]
    for array, cuts, kwargs in cases:
        assert _raised(False, monkeypatch, array, cuts, **kwargs) == _raised(
            True, monkeypatch, array, cuts, **kwargs), cuts


def test_a_payload_over_the_message_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value of 2^30 bytes (zero pages never touched): the kernel refuses it before reading
    it, and the typed error is the pure path's, also when the cuts are out of order too."""
    size = 1 << 30
    data = pa.py_buffer(np.zeros(size + 2, np.uint8))
    offsets = pa.py_buffer(np.array([0, 1, size + 1, size + 2], np.int32))
    array = pa.Array.from_buffers(pa.binary(), 3, [None, offsets, data])
    for cuts in ([0, 3], [0, 2, 1, 3]):
        for magic in (0, 1):
            got = _raised(False, monkeypatch, array, cuts, magic=magic)
            assert got == _raised(True, monkeypatch, array, cuts, magic=magic)
    assert _raised(False, monkeypatch, array, [0, 3]) == (
        MessageTooLargeError, f"message payload of {size} bytes exceeds the {1 << 30}-byte "
        "message bound")


def _call(offs: list[int], data: bytes, cuts: list[int], magic: int = 1, codec: int = 0,
          level: int = 6, crcs: object = None) -> tuple[bytes, bytes]:
    kernel = encode._kernel
    assert kernel is not None
    out: tuple[bytes, bytes] = kernel.encode_sets(
        np.array(offs, np.int64), data, np.array(cuts, np.int64), magic, codec, level, crcs
    )
    return out


def test_entry_point_checks_its_arguments() -> None:
    assert _call([0, 1, 3], b"abc", [0, 2])[0] == encode.encode_message_set([b"a", b"bc"])
    bad: list[tuple[list[int], bytes, list[int], dict[str, object]]] = [
        ([0, 4], b"abc", [0, 1], {}),  # past the data
        ([2, 1], b"abc", [0, 1], {}),  # decreasing offsets
        ([-1, 1], b"abc", [0, 1], {}),
        ([0, 1], b"abc", [0, 2], {}),  # a cut past the rows
        ([0, 1, 2], b"abc", [1, 0], {}),
        ([0, 1], b"abc", [0, 1], {"magic": 2}),
        ([0, 1], b"abc", [0, 1], {"codec": 3}),
        ([0, 1], b"abc", [0, 1], {"codec": 1, "level": 13}),
        ([0, 1], b"abc", [0, 1], {"crcs": np.zeros(2, np.uint32)}),
    ]
    for offs, data, cuts, kw in bad:
        with pytest.raises(ValueError):
            _call(offs, data, cuts, **kw)  # type: ignore[arg-type]  # bad on purpose
    kernel = encode._kernel
    assert kernel is not None
    with pytest.raises(ValueError):
        kernel.encode_sets(b"\0" * 7, b"", b"\0" * 8, 1, 0, 6, None)
    with pytest.raises(BufferError):
        kernel.encode_sets(np.zeros(2, np.int64), b"ab", np.zeros(2, np.int64), 1, 0, 6,
                           b"\0" * 8)  # crcs must be writable


def test_entry_point_output_buffers() -> None:
    """``into``: a writable buffer of at least the room the sets need, or a callable asked for
    that room (encode.py's pool); every codec writes the same bytes there as into a new
    bytes object, and a buffer too small, read-only, or a failing callable is refused."""
    kernel = encode._kernel
    assert kernel is not None
    values = [bytes(range(i % 256)) * (i % 7) for i in range(500)]
    offs = np.cumsum([0, *map(len, values)]).astype(np.int64)
    data, cuts = b"".join(values), np.array([0, 200, 400, 500], np.int64)
    asked: list[int] = []

    def take(room: int) -> npt.NDArray[np.uint8]:
        asked.append(room)
        return np.full(room, 0xAA, np.uint8)

    for codec in (0, 1, 2):
        fresh, ends = kernel.encode_sets(offs, data, cuts, 1, codec, 6, None)
        size = np.frombuffer(ends, np.int64)[-1]
        asked.clear()
        got, got_ends = kernel.encode_sets(offs, data, cuts, 1, codec, 6, None, take)
        assert got_ends == ends and got[:size].tobytes() == fresh
        assert len(asked) == 1
        assert asked[0] == size if codec == 0 else asked[0] >= size
        exact = np.zeros(asked[0], np.uint8)
        assert kernel.encode_sets(offs, data, cuts, 1, codec, 6, None, exact)[0] is exact
        assert exact[:size].tobytes() == fresh
        with pytest.raises(ValueError, match="room for"):
            kernel.encode_sets(offs, data, cuts, 1, codec, 6, None, np.zeros(asked[0] - 1,
                                                                              np.uint8))
        with pytest.raises(ValueError, match="room for"):
            kernel.encode_sets(offs, data, cuts, 1, codec, 6, None,
                               lambda room: np.zeros(room - 1, np.uint8))
        with pytest.raises(BufferError):
            kernel.encode_sets(offs, data, cuts, 1, codec, 6, None, lambda room: b"\0" * room)
        with pytest.raises(ZeroDivisionError):
            kernel.encode_sets(offs, data, cuts, 1, codec, 6, None, lambda room: 1 // 0)


def test_crc_engine() -> None:
    kernel = encode._kernel
    assert kernel is not None
    assert kernel.crc_engine_at(0) is False  # none found: the engine in use stays
    assert encode.ENCODE_CRC in ("isal", "libdeflate")
    values = [bytes(range(i % 256)) * (i % 5) for i in range(300)]
    crcs = np.zeros(300, np.uint32)
    encode_message_sets_arrow(pa.array(values), [0, 300], crcs_out=crcs)
    assert crcs.tolist() == [zlib.crc32(v) for v in values]
