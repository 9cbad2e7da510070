"""``decode_message_set(..., sink=ValueSink)``: the fast lane writes the values of consecutive
fetches into one buffer, so the batch reader joins them without copying every value
(``flat.join_views``). The batches must be exactly those decoded without a sink; a call that
falls back to the general path (or fails) must leave the values already handed out intact.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from _outcome import outcome

from kafka_pyspark._messages import decode_message_set, encode_message, walk
from kafka_pyspark._messages import encode_message_set as encode
from kafka_pyspark._messages.flat import ValueSink, join_views
from kafka_pyspark._spark.read.executor import _join
from kafka_pyspark.errors import MessageError

needs_kernel = pytest.mark.skipif(walk.kernel is None, reason="the compiled kernel is not built")


def sets(seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for _ in range(12):
        count = rnd.randrange(1, 60)
        values = [rnd.randbytes(rnd.choice([0, 1, 7, 180, 900])) for _ in range(count)]
        kind = rnd.choice(["none", "gzip", "snappy"])
        if kind == "none":
            out.append(b"".join(encode_message(v, magic=rnd.choice([0, 1])) for v in values))
        else:
            out.append(encode(values, compression=kind) + encode(values[:3], compression=kind))
    return out


def decode_all(data: list[bytes], sink: ValueSink | None) -> list[pa.RecordBatch]:
    return [decode_message_set(d, 1000 * i, sink=sink).batch for i, d in enumerate(data)]


@pytest.mark.parametrize("seed", range(6))
def test_batches_are_those_without_a_sink(seed: int) -> None:
    data = sets(seed)
    plain = decode_all(data, None)
    sink = ValueSink(1 << 20, 4096)
    into = decode_all(data, sink)
    assert [b.to_pydict() for b in into] == [b.to_pydict() for b in plain]
    joined = _join(into)
    joined.validate(full=True)
    assert joined.equals(pa.concat_batches(plain))


@pytest.mark.parametrize("seed", range(6))
def test_cut_stopped_and_corrupt_sets_decode_as_without_a_sink(seed: int) -> None:
    rnd = random.Random(seed)
    sink = ValueSink(1 << 16, 512)
    for i, data in enumerate(sets(seed + 100)):
        cut = bytearray(data[: rnd.randrange(len(data) + 1)] if rnd.random() < 0.5 else data)
        if cut and rnd.random() < 0.3:
            cut[rnd.randrange(len(cut))] ^= 1 << rnd.randrange(8)
        kw: dict[str, Any] = {"verify_crc": rnd.random() < 0.8}
        if rnd.random() < 0.4:
            kw["stop_at"] = 1000 * i + rnd.randrange(len(cut) + 1)
        assert outcome(bytes(cut), 1000 * i, sink=sink, **kw) == outcome(bytes(cut), 1000 * i, **kw)


@needs_kernel
def test_values_of_consecutive_fetches_join_without_a_copy() -> None:
    sink = ValueSink(1 << 20, 4096)
    into = decode_all(sets(7), sink)
    values = join_views([b.column("value") for b in into])
    assert values is not None
    assert sink.buffer is not None
    assert values.buffers()[2].address == sink.buffer.address  # the sink's bytes, not a copy
    assert values.to_pylist() == [v for b in into for v in b.column("value").to_pylist()]
    sink.reset()  # what the reader does once it handed a batch on: a fresh buffer
    later = decode_all(sets(8), sink)
    assert join_views([into[-1].column("value"), later[0].column("value")]) is None
    assert values.to_pylist() == [v for b in into for v in b.column("value").to_pylist()]


@needs_kernel
def test_a_sink_too_small_starts_a_fresh_buffer() -> None:
    data = sets(3)
    sink = ValueSink(0, 0)  # room for one call at a time
    into = decode_all(data, sink)
    assert join_views([b.column("value") for b in into]) is None
    assert _join(into).equals(pa.concat_batches(decode_all(data, None)))


def snappy_with_bad_inner_crc() -> bytes:
    inner = bytearray(encode_message(b"x" * 50) * 3)
    inner[-1] ^= 0xFF  # the last inner message's payload no longer matches its CRC
    from kafka_pyspark._messages.compression import snappy_compress

    return encode_message(snappy_compress(bytes(inner)), codec=2)


@needs_kernel
@pytest.mark.parametrize("bad", ["snappy", "plain"])
def test_a_failed_call_leaves_what_was_handed_out_intact(bad: str) -> None:
    sink = ValueSink(1 << 20, 4096)
    first = decode_message_set(encode([b"one", b"two" * 40], compression="snappy"), 0,
                               sink=sink).batch
    if bad == "snappy":
        data = snappy_with_bad_inner_crc()
    else:
        broken = bytearray(encode_message(b"y" * 30) * 2)
        broken[-1] ^= 1
        data = bytes(broken)
    with pytest.raises(MessageError) as e:
        decode_message_set(data, 500, sink=sink)
    assert e.value.offset == (500 if bad == "snappy" else 500 + len(data) // 2)
    assert first.column("value").to_pylist() == [b"one", b"two" * 40]
    second = decode_message_set(encode_message(b"three"), 900, sink=sink).batch
    values = join_views([first.column("value"), second.column("value")])
    assert values is not None
    assert values.to_pylist() == [b"one", b"two" * 40, b"three"]


def test_the_pure_path_ignores_the_sink(monkeypatch: pytest.MonkeyPatch) -> None:
    data = sets(5)
    expected = [b.to_pydict() for b in decode_all(data, None)]
    monkeypatch.setattr(walk, "kernel", None)
    sink = ValueSink(1 << 20, 4096)
    got: list[Any] = [b.to_pydict() for b in decode_all(data, sink)]
    assert got == expected
    assert sink.buffer is None


def test_constant_columns_are_right_whatever_the_cache_holds() -> None:
    from kafka_pyspark._messages.columns import constant_column

    for i in range(40):  # more values than the cache keeps
        n = [0, 3, 70_000][i % 3]
        assert constant_column(f"t{i}", n).to_pylist() == [f"t{i}"] * n
        assert constant_column(i, n).to_pylist() == [i] * n
        assert constant_column(str(i), 2).to_pylist() == [str(i)] * 2  # not the int's column
    assert constant_column("é", 2).type == pa.string()
    assert constant_column(7, 2).type == pa.int32()
