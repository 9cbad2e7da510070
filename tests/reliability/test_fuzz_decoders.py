"""Fuzzed decoders: the message-set codec (compiled kernel and pure-Python path), the
gzip/snappy decompressors and the wire decoders, fed random and mutated valid buffers.

Bad input must end in a typed domain error raised *deliberately*: an internal error
(IndexError, struct.error, ValueError, OverflowError, TypeError, KeyError, ...) escaping, or
sitting anywhere in the ``__cause__``/``__context__`` chain of the domain error (a catch-all
that re-labels a crash), fails the test. Decompression bombs and deep nesting end in a clear
error with memory bounded by ``max_decompressed_size``. A short coverage-guided atheris run
(when atheris imports) drives the decoder in a subprocess.
"""

from __future__ import annotations

import gzip
import os
import random
import struct
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from _fuzz import assert_deliberate, mutate, rewrap, run, sample_log
from _kwargs import DecodeOptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_pyspark import _wire as wire
from kafka_pyspark._messages import (
    MAX_NESTING_DEPTH,
    decode_message_set,
    encode_message,
    encode_message_set,
    scan_boundaries,
    walk,
)
from kafka_pyspark._messages import compression as comp
from kafka_pyspark.errors import (
    DecompressedSizeError,
    DecompressionError,
    MessageError,
    ProtocolError,
)

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(params=["kernel", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "kernel" and walk.kernel is None:
        pytest.skip("the compiled kernel is not built")
    if request.param == "python":
        monkeypatch.setattr(walk, "kernel", None)
    yield request.param


def decode_all_ways(data: bytes, rnd: random.Random) -> None:
    base = rnd.randrange(1 << 40)
    options: list[DecodeOptions] = [
        {}, {"verify_crc": False}, {"max_decompressed_size": rnd.randrange(0, 400)},
        {"stop_at": base + rnd.randrange(len(data) + 2)}]
    for kw in options:
        result = run(partial(decode_message_set, data, base, **kw), MessageError)
        if result is not None:
            assert 0 <= result.bytes_consumed <= len(data)
            assert result.batch.num_rows >= result.message_count or result.message_count
    run(lambda: scan_boundaries(data, base), MessageError)


# --- the message-set codec -----------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=400), seed=st.integers(0, 2**32))
def test_random_bytes(engine: str, data: bytes, seed: int) -> None:
    decode_all_ways(data, random.Random(seed))


@FUZZ
@given(seed=st.integers(0, 2**32))
def test_mutated_logs(engine: str, seed: int) -> None:
    rnd = random.Random(seed)
    decode_all_ways(mutate(rnd, sample_log(rnd)), rnd)


@FUZZ
@given(seed=st.integers(0, 2**32))
def test_mutated_inner_sets(engine: str, seed: int) -> None:
    rnd = random.Random(seed)
    decode_all_ways(rewrap(rnd, mutate(rnd, sample_log(rnd))), rnd)


@FUZZ
@given(data=st.binary(max_size=300), limit=st.integers(0, 1 << 12))
def test_decompressors(data: bytes, limit: int) -> None:
    for payload in (data, b"\x1f\x8b" + data, comp.SNAPPY_JAVA_HEADER + data):
        run(partial(comp.gzip_decompress, payload, limit, offset=7), MessageError)
        run(partial(comp.snappy_decompress, payload, limit, offset=7), MessageError)


# --- bombs and nesting ---------------------------------------------------------------------


def bounded(fn: Callable[[], Any], limit: int) -> BaseException:
    """Run ``fn`` (which must fail) and check that Python allocated at most ~limit bytes."""
    tracemalloc.start()
    try:
        with pytest.raises(MessageError) as info:
            fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit + (2 << 20), peak
    assert_deliberate(info.value, MessageError)
    return info.value


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_decompression_bomb(engine: str, codec: str) -> None:
    raw = encode_message_set([bytes(1 << 20)] * 16)  # 16 MiB of zeros, inside messages
    payload = comp.gzip_compress(raw) if codec == "gzip" else comp.snappy_compress(raw)
    assert len(payload) < len(raw) // 20  # snappy's best is ~21x
    data = encode_message(payload, codec=codec)
    err = bounded(lambda: decode_message_set(data, 100, max_decompressed_size=1 << 20), 1 << 20)
    assert isinstance(err, DecompressedSizeError) and err.offset == 100
    assert "max.decompressed.size" in str(err)


def test_snappy_block_announcing_a_huge_size(engine: str) -> None:
    block = b"\xff\xff\xff\xff\x0f" + b"\x00"  # varint 2^32-1, then nothing
    payload = comp.SNAPPY_JAVA_HEADER + struct.pack(">i", len(block)) + block
    err = bounded(lambda: decode_message_set(encode_message(payload, codec=2),
                                             max_decompressed_size=1 << 20), 1 << 20)
    assert isinstance(err, DecompressedSizeError)


def test_nested_bomb_counts_every_level(engine: str) -> None:
    data = encode_message_set([bytes(1 << 16)] * 16)  # 1 MiB
    for _ in range(3):
        data = encode_message(gzip.compress(data), codec=1)
    err = bounded(lambda: decode_message_set(data, max_decompressed_size=1 << 20), 1 << 20)
    assert isinstance(err, DecompressedSizeError)


def test_deep_nesting(engine: str) -> None:
    data = encode_message(b"core")
    for _ in range(MAX_NESTING_DEPTH + 1):
        data = encode_message(gzip.compress(data), codec=1)
    err = bounded(lambda: decode_message_set(data), 1 << 20)
    assert isinstance(err, DecompressionError) and "nested more than" in str(err)


# --- wire decoders -------------------------------------------------------------------------


def valid_frames(rnd: random.Random) -> list[bytes]:
    topic = rnd.choice(["t", "topic-1", "x" * 40])
    messages = encode_message_set([rnd.randbytes(5)])
    requests: list[wire.Request] = [
        wire.ProduceRequest(topic, 1, messages),
        wire.FetchRequest(topic, 0, 123, 4096),
        wire.OffsetsRequest(topic, 2, -1, 10),
        wire.MultiFetchRequest((wire.FetchRequest(topic, 0, 0, 10),
                                wire.FetchRequest("b", 1, 5, 20))),
        wire.MultiProduceRequest((wire.ProduceRequest(topic, 0, messages),)),
    ]
    frames = [wire.encode_request(r)[4:] for r in requests]
    frames.append(wire.encode_fetch_response(0, messages)[4:])
    frames.append(wire.encode_offsets_response(0, [1, 2, 3])[4:])
    frames.append(wire.encode_multifetch_response([(0, messages), (3, b"")])[4:])
    return frames


def decode_wire(body: bytes) -> None:
    run(lambda: wire.decode_request(body), ProtocolError)
    run(lambda: wire.decode_fetch_response(body), ProtocolError)
    run(lambda: wire.decode_offsets_response(body), ProtocolError)
    run(lambda: wire.decode_multifetch_response(body, expected=2), ProtocolError)
    run(lambda: wire.frame_length(body[:4]), ProtocolError)


@FUZZ
@given(data=st.binary(max_size=200))
def test_wire_random_bytes(data: bytes) -> None:
    decode_wire(data)


@FUZZ
@given(seed=st.integers(0, 2**32))
def test_wire_mutated_frames(seed: int) -> None:
    rnd = random.Random(seed)
    for frame in valid_frames(rnd):
        decode_wire(mutate(rnd, frame))


# --- coverage-guided (atheris) -------------------------------------------------------------

_ATHERIS = r"""
import sys, atheris
with atheris.instrument_imports(include=["kafka_pyspark"]):
    from kafka_pyspark.errors import MessageError
    from kafka_pyspark._messages import decode_message_set, scan_boundaries
from _fuzz import assert_deliberate  # tests/ is on PYTHONPATH
def one(data):
    for kw in ({}, {"max_decompressed_size": 300}):
        try:
            decode_message_set(data, 0, **kw)
        except MessageError as e:
            assert_deliberate(e)
    try:
        scan_boundaries(data)
    except MessageError as e:
        assert_deliberate(e)

atheris.Setup(sys.argv, one)
atheris.Fuzz()
"""


def test_atheris_coverage_guided(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    rnd = random.Random(3)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(20):
        log = sample_log(rnd)
        (corpus / f"seed{i}").write_bytes(log if i % 2 else rewrap(rnd, log))
    env = dict(os.environ)
    tests_dir = str(Path(__file__).resolve().parent.parent)  # for _fuzz
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, env.get("PYTHONPATH")) if p)
    for pure in ("", "1"):
        env["KAFKA_PYSPARK_PURE"] = pure
        done = subprocess.run(
            [sys.executable, "-c", _ATHERIS, "-max_total_time=5", "-rss_limit_mb=1024",
             "-max_len=4096", "-timeout=10", str(corpus)],
            capture_output=True, text=True, timeout=120, env=env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
