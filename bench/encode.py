"""The encoder and the Producer on realistic values, against bare limits measured in this run.

Values: :func:`bench.data.realistic_values` (log-normal lengths, median ~180 B, JSON-like),
cut into sets of ``SET_SIZE`` (the writer's default ``batch.size``), one core, no Spark.

* ``encode.realistic.<codec>``: ``encode_message_sets_arrow``, one call per ``CHUNK`` rows (an
  Arrow batch as Spark hands it over; the writer calls it per flush), rows/s, against its limit:
  - none: one CRC-32 over all payload bytes (ISA-L, one call) plus one copy of them into a reused
    buffer: what any encoder must at least do (target: >= 70%);
  - snappy: cramjam's raw snappy compression of the same framed messages, block by block
    (snappy-java's 32 KiB), into a reused buffer (target: >= 80%);
  - gzip: libdeflate's plain deflate of the same framed messages, set by set, at the encoder's
    level, into a reused buffer (target: >= 85%).
* ``encode.realistic.<codec>.pure``: the same on the pure-Python twin (the encoder before the
  compiled pass), interleaved with the rows above, against the same limit.
* ``encode.realistic.<codec>.per_payload``: the compiled encoder with its CRC fold lanes off
  (one CRC call per payload, what CPUs without AVX-512 carry-less multiply run), interleaved
  too; only where the lanes run.
* ``produce.realistic.<codec>``: encoding plus ``client.Producer`` (send every set, MULTIPRODUCE
  of the writer's request size, delivery barrier) to the sink broker of :mod:`bench.sink`,
  against the same limit.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from bench.data import realistic_values
from bench.results import Recorder, best_times

ROWS = 200_000
CHUNK = 10_000
SET_SIZE = 200
REPEAT = 5
TOPIC = "bench-encode"
TARGETS = {"none": ">= 70% of CRC + one copy", "snappy": ">= 80% of plain snappy compression",
           "gzip": ">= 85% of plain libdeflate deflate at the same level"}


def _inner(array: pa.Array, cuts: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The framed messages of every set, back to back, and where each set starts and ends."""
    from kafka_pyspark._messages.encode import encode_message_sets_arrow

    sets = encode_message_sets_arrow(array, cuts)
    ends = np.zeros(len(sets) + 1, dtype=np.int64)
    ends[1:] = np.cumsum([len(s) for s in sets])
    return b"".join(sets), ends


def limits(array: pa.Array, cuts: np.ndarray) -> dict[str, Callable[[], Any]]:
    """The bare limit of each codec, as a function doing that work once over all rows."""
    import cramjam

    from kafka_pyspark._messages import _encode  # type: ignore[attr-defined]
    from kafka_pyspark._messages.compression import SNAPPY_BLOCK_SIZE
    from kafka_pyspark._messages.crc import crc32
    from kafka_pyspark._messages.encode import GZIP_DEFAULT_LEVEL

    payloads = np.frombuffer(array.buffers()[2], dtype=np.uint8)
    copy_to = np.empty_like(payloads)
    inner, ends = _inner(array, cuts)
    view = memoryview(inner)
    blocks = [
        view[at : min(int(end), at + SNAPPY_BLOCK_SIZE)]
        for start, end in itertools.pairwise(ends)
        for at in range(int(start), int(end), SNAPPY_BLOCK_SIZE)
    ]
    room = np.empty(cramjam.snappy.compress_raw_max_len(bytes(SNAPPY_BLOCK_SIZE)), np.uint8)

    def none() -> None:
        crc32(payloads)
        np.copyto(copy_to, payloads)

    def snappy() -> None:
        compress = cramjam.snappy.compress_raw_into
        for block in blocks:
            compress(block, room)  # type: ignore[arg-type]  # numpy arrays are buffers

    def gzip() -> None:
        _encode.deflate_sets(inner, ends, GZIP_DEFAULT_LEVEL)

    return {"none": none, "snappy": snappy, "gzip": gzip}


def _pure(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run on the pure-Python encoder (the compiled one set aside meanwhile)."""
    from kafka_pyspark._messages import encode

    def run() -> Any:
        kernel, encode._kernel = encode._kernel, None
        try:
            return fn()
        finally:
            encode._kernel = kernel

    return run


def _per_payload(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run with the compiled encoder's fold lanes off (one CRC call per payload)."""
    from kafka_pyspark._messages import encode

    def run() -> Any:
        assert encode._kernel is not None
        encode._kernel.frame_lanes(0)
        try:
            return fn()
        finally:
            encode._kernel.frame_lanes(1)

    return run


def run(recorder: Recorder) -> None:
    from bench.sink import Sink
    from kafka_pyspark._messages.encode import ENCODE_LANES, ENGINE, encode_message_sets_arrow
    from kafka_pyspark._shared.defaults import MAX_MESSAGE_SIZE
    from kafka_pyspark._write.sizes import request_limit
    from kafka_pyspark.client import Producer

    array = pa.array(realistic_values(ROWS), pa.binary())
    cuts = np.arange(0, ROWS + 1, SET_SIZE, dtype=np.int64)
    chunks = [array.slice(at, CHUNK) for at in range(0, ROWS, CHUNK)]
    chunk_cuts = np.arange(0, CHUNK + 1, SET_SIZE, dtype=np.int64)
    bare = limits(array, cuts)
    request = request_limit(MAX_MESSAGE_SIZE)  # the writer's requests (sizes.py)
    with Sink() as sink:
        for codec in ("none", "snappy", "gzip"):

            def encode(c: str = codec) -> None:
                for a in chunks:  # each chunk's sets dropped before the next, as once sent
                    encode_message_sets_arrow(a, chunk_cuts, compression=c)

            def produce(c: str = codec) -> None:
                with Producer({0: ("127.0.0.1", sink.port)}, max_request_size=request) as prod:
                    for a in chunks:
                        for i, data in enumerate(encode_message_sets_arrow(a, chunk_cuts,
                                                                           compression=c)):
                            prod.send(0, TOPIC, i & 1, data)
                    prod.flush()

            runs = {"limit": bare[codec], "encode": encode, "pure": _pure(encode),
                    "produce": produce}
            if ENCODE_LANES:
                runs["per_payload"] = _per_payload(encode)
            best = best_times(runs, repeat=REPEAT)
            rate = {k: ROWS / v for k, v in best.items()}
            recorder.record(f"encode.realistic.{codec}", rate["encode"], "rows/s",
                            limit=rate["limit"], target=TARGETS[codec],
                            note=f"encoder engine: {ENGINE}")
            recorder.record(f"encode.realistic.{codec}.pure", rate["pure"], "rows/s",
                            limit=rate["limit"], note="the pure-Python twin, same run")
            if ENCODE_LANES:
                recorder.record(f"encode.realistic.{codec}.per_payload", rate["per_payload"],
                                "rows/s", limit=rate["limit"],
                                note="the fold lanes off: one CRC call per payload, same run")
            recorder.record(f"produce.realistic.{codec}", rate["produce"], "rows/s",
                            limit=rate["limit"], note="encode + Producer to the sink broker")


if __name__ == "__main__":  # pragma: no cover
    from bench.__main__ import main

    sys.exit(main(["encode"]))
