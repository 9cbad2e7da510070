"""Message-set codec throughput against the physical limits measured in the same run.

Targets (docs/dev/FAST-LANE.md "Performance targets"), per core, 200-byte messages:

- decode, uncompressed, CRC on: >= 2,000,000 messages/s and >= 50% of the limit, the cost the
  bytes have anyway: CRC-32 over every payload with the fastest CRC engine available (ISA-L's
  when python-isal imports: one call per 1 MiB fetch) plus one copy of the payloads;
- decode, gzip: >= 80% of plain stdlib ``zlib`` decompression of the same wrapper payloads
  (the decoder inflates with libdeflate in its gzip lane, ``_messages/_gzip.c``, when that is
  built, else with ISA-L; an ``.isal_inflate`` row shows plain ISA-L inflate of the same
  payloads against the same zlib limit);
- decode, snappy: >= 60% of plain snappy decompression of the same wrapper payloads
  (``cramjam.snappy.decompress_raw_into`` per snappy-java block into one reused buffer, the
  blocks cut out as zero-copy views before timing; with the compiled kernel the decoder uses
  the kernel's own snappy decoder, and a ``.kernel_snappy`` row shows that decoder's plain
  decompression of the same blocks against the same limit).

The decode loop is the reader's: FETCH-sized (1 MiB) zero-copy slices of one log, each decoded
from the previous ``next_offset`` (so partial tails are part of the work). Wrappers hold
``batch.size`` = 200 messages, as 0.7.2's producer makes them. Payloads are JSON-like log lines
(gzip ~3x, snappy ~2x); a variable-size row (100-300 bytes) shows the case where lengths differ
from message to message. ``*.realistic`` rows: log-normal lengths (:mod:`bench.data`,
median 180 B) in uncompressed sets and gzip/snappy sets of 200; their compressed limits are plain
decompression from Python (gzip: the faster of python-isal's one-shot ``decompress`` and a
``decompressobj`` bounded by the ISIZE, whose speeds differ with the allocator's state; stdlib
zlib without python-isal); target >= 50% (none) and >= 90% (gzip, snappy). The informative
``.libdeflate_inflate`` rows time plain libdeflate inflate of the same payloads in C, one call
each into a reused buffer (the gzip lane's inflater, without the rest of decoding: about the
physical limit), against the same limit. Encoding rows time ``encode_message_set_arrow`` on
200-row slices (the writer's call) and ``encode_message_sets_arrow`` cutting all slices in one
call; gzip encoding is compared with bare ``zlib`` deflate of the same bytes.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from bench.data import realistic_values
from bench.results import Recorder, best_time, best_times
from kafka_pyspark._messages import decode_message_set, encode_message_set, flat
from kafka_pyspark._messages.compression import GZIP_ENGINE, GZIP_LEVEL
from kafka_pyspark._messages.crc import CRC32_ENGINE, crc32, isal_zlib
from kafka_pyspark._messages.encode import encode_message_set_arrow, encode_message_sets_arrow

FETCH_SIZE = 1 << 20
MESSAGES = 40_000
BATCH = 200
SIZE = 200
REPEAT = 7
REALISTIC_MESSAGES = 100_000

_WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform",
    "victor", "whiskey", "xray", "yankee", "zulu", "error", "warn", "info", "debug", "checkout",
    "cart", "login", "logout", "search", "payment", "refund", "shipped",
]


def make_payloads(count: int, size: int | tuple[int, int] = SIZE, seed: int = 7) -> list[bytes]:
    """JSON-like log lines of exactly ``size`` bytes (or a size drawn from a range)."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        n = size if isinstance(size, int) else rnd.randint(*size)
        line = (
            f'{{"ts":{1700000000000 + i * 7},"host":"web-{rnd.randrange(40):02d}",'
            f'"user":{rnd.randrange(10**6)},"status":{rnd.choice((200, 200, 200, 404, 500))},'
            f'"ms":{rnd.randrange(900)},"trace":"{rnd.getrandbits(64):016x}","msg":"'
        )
        while len(line) < n:
            line += rnd.choice(_WORDS) + " "
        out.append((line[: n - 2] + '"}').encode()[:n])
    return out


def _read_all(log: memoryview, verify_crc: bool = True) -> int:
    offset = 0
    rows = 0
    end = len(log)
    while offset < end:
        result = decode_message_set(log[offset : offset + FETCH_SIZE], offset,
                                    verify_crc=verify_crc)
        rows += result.batch.num_rows
        if result.bytes_consumed == 0:  # pragma: no cover - would loop forever
            raise RuntimeError("no progress")
        offset = result.next_offset
    return rows


def _chunks(data: bytes, size: int = FETCH_SIZE) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _wrapper_payloads(log: bytes) -> list[bytes]:
    """The payloads of the (outer) wrapper messages of a compressed log."""
    out = []
    pos = 0
    while pos < len(log):
        (length,) = struct.unpack_from(">i", log, pos)
        out.append(log[pos + 10 : pos + 4 + length])
        pos += 4 + length
    return out


def _snappy_blocks(payloads: list[bytes]) -> list[memoryview]:
    """The raw snappy blocks of snappy-java wrapper payloads, as zero-copy views (cut before
    timing: the limit is the decompression alone, not a copy of its input)."""
    blocks = []
    unpack = struct.Struct(">i").unpack_from
    for p in payloads:
        view = memoryview(p)
        pos = 16
        while pos < len(p):
            (n,) = unpack(p, pos)
            blocks.append(view[pos + 4 : pos + 4 + n])
            pos += 4 + n
    return blocks


def _snappy_plain(payloads: list[bytes]) -> Callable[[], None]:
    """Plain decompression of the blocks by cramjam, each into one reused buffer, as the
    kernel row and the decoder write theirs (``decompress_raw`` where cramjam has no
    ``decompress_raw_into``)."""
    import cramjam

    blocks = _snappy_blocks(payloads)
    out = bytearray(1 << 20)
    into = getattr(cramjam.snappy, "decompress_raw_into", None)
    decompress = cramjam.snappy.decompress_raw

    def run() -> None:
        if into is None:
            for b in blocks:
                decompress(b)
        else:
            for b in blocks:
                into(b, out)

    return run


def _snappy_kernel(payloads: list[bytes]) -> Callable[[], None] | None:
    """Plain decompression of the same blocks by the decode kernel's own snappy decoder (the
    one the decoder uses when the kernel is built), into one reused buffer."""
    from kafka_pyspark._messages import walk

    if walk.kernel is None:
        return None
    decompress = walk.kernel.snappy_raw
    blocks = _snappy_blocks(payloads)
    out = bytearray(1 << 20)

    def run() -> None:
        for b in blocks:
            decompress(b, out)

    return run


def _gzip_plain(payloads: list[bytes]) -> dict[str, Callable[[], Any]]:
    """Plain inflate of the payloads: by python-isal, one-shot (``isal``) and by a
    ``decompressobj`` bounded by each ISIZE (``isal_obj``); by libdeflate into one reused
    buffer (``libdeflate``, when the gzip lane is built)."""
    fns: dict[str, Callable[[], Any]] = {}
    sizes = [int.from_bytes(p[-4:], "little") + 1 for p in payloads]
    if isal_zlib is not None:
        inflate, inflater = isal_zlib.decompress, isal_zlib.decompressobj
        fns["isal"] = lambda: [inflate(p, 31) for p in payloads]
        pairs = list(zip(payloads, sizes, strict=True))
        fns["isal_obj"] = lambda: [inflater(31).decompress(p, n) for p, n in pairs]
    lane = flat.gzip_lane
    if lane is not None:
        out = bytearray(max(sizes, default=0))
        libdeflate = lane.inflate
        fns["libdeflate"] = lambda: [libdeflate(p, out) for p in payloads]
    return fns


def _gzip_engine() -> str:
    """What inflates gzip wrappers when decoding."""
    lane = flat.gzip_lane
    return f"libdeflate {lane.LIBDEFLATE} (gzip lane)" if lane is not None else GZIP_ENGINE


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _decode_rows(rec: Recorder, label: str, values: list[bytes], target: str) -> None:
    log = encode_message_set(values)
    payload_bytes = b"".join(values)
    pieces = _chunks(payload_bytes)
    mv = memoryview(log)
    assert _read_all(mv) == len(values)
    best = best_times(
        {
            "decode": lambda: _read_all(mv),
            "crc": lambda: [crc32(p) for p in pieces],
            "copy": lambda: [bytearray(p) for p in pieces],
            "nocrc": lambda: _read_all(mv, False),
        },
        repeat=REPEAT,
    )
    t_decode, t_crc, t_copy, t_nocrc = best["decode"], best["crc"], best["copy"], best["nocrc"]
    n = len(values)
    limit = _rate(n, t_crc + t_copy)
    mb = len(payload_bytes) / 1e6
    rec.record(f"decode.none.{label}", _rate(n, t_decode), "msgs/s", limit=limit, target=target,
               note=f"limit: {CRC32_ENGINE} CRC-32 + one copy")
    rec.record(f"decode.none.{label}.MBps", mb / t_decode, "MB/s", limit=mb / (t_crc + t_copy))
    rec.record(f"decode.none.{label}.no_crc", _rate(n, t_nocrc), "msgs/s", limit=limit,
               note="verify_crc=False, against the same CRC+copy limit")


def _compressed_log(values: list[bytes], codec: str) -> bytes:
    return b"".join(
        encode_message_set(values[i : i + BATCH], compression=codec)
        for i in range(0, len(values), BATCH)
    )


def _compressed_rows(
    rec: Recorder, codec: str, values: list[bytes], target: str, label: str = "200B",
    engine_limit: bool = False,
) -> None:
    """``engine_limit``: the limit is plain decompression by the engine the codec uses (ISA-L
    inflate when it imports), else stdlib zlib (the fixed-size target)."""
    log = _compressed_log(values, codec)
    payloads = _wrapper_payloads(log)
    mv = memoryview(log)
    assert _read_all(mv) == len(values)
    plain: Callable[[], Any]
    fns: dict[str, Callable[[], Any]] = {}
    if codec == "gzip":
        plain = lambda: [zlib.decompress(p, 31) for p in payloads]  # noqa: E731
        fns.update(_gzip_plain(payloads))
    else:
        plain = _snappy_plain(payloads)
        kernel_snappy = _snappy_kernel(payloads)
        if kernel_snappy is not None:
            fns["kernel"] = kernel_snappy
    fns.update(decode=lambda: _read_all(mv), plain=plain, nocrc=lambda: _read_all(mv, False))
    best = best_times(fns, repeat=REPEAT)
    t_decode, t_plain, t_nocrc = best["decode"], best["plain"], best["nocrc"]
    if "isal" in best:  # the faster of the two ways of calling it (see the module's docstring)
        best["isal"] = min(best["isal"], best.pop("isal_obj"))
    n = len(values)
    limit = _rate(n, best["isal"] if engine_limit and "isal" in best else t_plain)
    engine = f"; gzip inflate: {_gzip_engine()}" if codec == "gzip" else ""
    if engine_limit and codec == "gzip":
        engine += f"; limit: plain {GZIP_ENGINE} inflate"
    rec.record(f"decode.{codec}.{label}", _rate(n, t_decode), "msgs/s", limit=limit,
               target=target,
               note=f"compression ratio {sum(map(len, values)) / len(log):.2f}{engine}")
    rec.record(f"decode.{codec}.{label}.no_crc", _rate(n, t_nocrc), "msgs/s", limit=limit,
               note="verify_crc=False")
    if "kernel" in best:
        rec.record(f"decode.{codec}.{label}.kernel_snappy", _rate(n, best["kernel"]), "msgs/s",
                   limit=limit, note="plain decompression by the decode kernel's own snappy "
                   "decoder (what decode uses), vs the cramjam limit")
    if "isal" in best and not engine_limit:
        rec.record(f"decode.{codec}.{label}.isal_inflate", _rate(n, best["isal"]), "msgs/s",
                   limit=limit, note="plain ISA-L inflate of the same payloads, vs plain zlib")
    if "libdeflate" in best:
        rec.record(f"decode.{codec}.{label}.libdeflate_inflate", _rate(n, best["libdeflate"]),
                   "msgs/s", limit=limit, note="plain libdeflate inflate of the same payloads in "
                   "C (the gzip lane's inflater, nothing else), vs the same limit")


def _encode_rows(rec: Recorder, values: list[bytes]) -> None:
    array = pa.array(values, pa.binary())
    slices = [array.slice(i, BATCH) for i in range(0, len(array), BATCH)]
    cuts = [*range(0, len(array), BATCH), len(array)]
    n = len(values)
    inner = [encode_message_set(values[i : i + BATCH]) for i in range(0, n, BATCH)]

    def deflate() -> None:
        for raw in inner:
            c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15)
            c.compress(raw)
            c.flush()

    deflate_limit = _rate(n, best_time(deflate, repeat=REPEAT))
    for codec in ("none", "snappy", "gzip"):

        def one(c: str = codec) -> list[bytes]:
            return [encode_message_set_arrow(s, compression=c) for s in slices]

        def sets(c: str = codec) -> list[bytes | memoryview]:
            return encode_message_sets_arrow(array, cuts, compression=c)

        best = best_times({"one": one, "sets": sets}, repeat=REPEAT)
        limit = None
        target = ">= 500,000 msgs/s (writer, end to end)"
        if codec == "gzip":
            limit = deflate_limit
            target = ">= 70% of bare zlib compression (writer, end to end)"
        rec.record(f"encode.arrow.{codec}.batch200", _rate(n, best["one"]), "msgs/s",
                   limit=limit, target=target, note="encode_message_set_arrow per 200-row slice")
        rec.record(f"encode.arrow.{codec}.sets200", _rate(n, best["sets"]), "msgs/s",
                   limit=limit, note="encode_message_sets_arrow: all 200-row sets in one call")


def run(rec: Recorder) -> None:
    print(f"   engines: CRC-32 {CRC32_ENGINE}, gzip inflate {_gzip_engine()}", flush=True)
    fixed = make_payloads(MESSAGES)
    _decode_rows(rec, "200B", fixed, ">= 2,000,000 msgs/s and ratio >= 50%")
    _decode_rows(rec, "100-300B", make_payloads(MESSAGES, (100, 300), seed=11),
                 "(informative: lengths differ from message to message)")
    _compressed_rows(rec, "gzip", fixed, "ratio >= 80%")
    _compressed_rows(rec, "snappy", fixed, "ratio >= 60%")
    _encode_rows(rec, fixed)
    real = realistic_values(REALISTIC_MESSAGES)
    _decode_rows(rec, "realistic", real, "ratio >= 50% (log-normal lengths, bench.data)")
    for codec in ("gzip", "snappy"):
        _compressed_rows(rec, codec, real, "ratio >= 90% of plain decompression", "realistic",
                         engine_limit=True)
