"""The executor's batch coalescing (``_spark/read/executor.py``): its byte count is Arrow's."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafka_pyspark._messages import decode_message_set, encode_message_set
from kafka_pyspark._messages.flat import ValueSink
from kafka_pyspark._spark.read.executor import _Coalescer, _join, _nbytes

VALUES = [b"x" * (i % 37) for i in range(300)] + [b"", b"\x00" * 1000]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "mixed"])
def test_held_bytes_are_what_record_batch_nbytes_counts(codec: str) -> None:
    if codec == "mixed":  # plain messages then a wrapper: the general path
        data = encode_message_set(VALUES) + encode_message_set(VALUES, compression="gzip")
    else:
        data = encode_message_set(VALUES, compression=codec)
    sink = ValueSink(1 << 20, 4096)
    batches = [decode_message_set(data, i * len(data), sink=sink).batch for i in range(3)]
    batches.append(decode_message_set(data, 0).batch)  # without the sink
    for b in batches:
        assert b.num_rows > 0
        for piece in (b, b.slice(1), b.slice(5, 17), b.slice(b.num_rows - 1)):
            assert _nbytes(piece) == piece.nbytes
    joined = _join(batches[:3])
    assert _nbytes(joined) == joined.nbytes
    assert joined.equals(pa.concat_batches(batches[:3]))


def ipc_bytes(batches: list[pa.RecordBatch]) -> bytes:
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)
    return bytes(out.getvalue())


def coalesced(fill: int, monkeypatch: pytest.MonkeyPatch) -> list[pa.RecordBatch]:
    """What the reader hands Spark for two partitions' fetches, every buffer the decoder
    allocates first filled with ``fill`` (what earlier reads left in that memory)."""
    allocate = pa.allocate_buffer

    def dirty(size: int, *args: object, **kwargs: object) -> pa.Buffer:
        buf = allocate(size, *args, **kwargs)
        memoryview(buf).cast("B")[:] = bytes([fill]) * size
        return buf

    monkeypatch.setattr(pa, "allocate_buffer", dirty)
    out = _Coalescer(0, 400, 1 << 20)
    batches: list[pa.RecordBatch] = []
    for topic, partition, codec in [("a", 0, "none"), ("a", 0, "snappy"), ("b", 1, "none"),
                                    ("b", 1, "gzip"), ("b", 1, "none")]:
        data = encode_message_set([b"v" * 5, b"odd" * 7, b"x"], compression=codec)
        batch = decode_message_set(data, 0, sink=out.sink).batch
        batches.extend(out.add(topic, partition, batch))
    batches.extend(out.flush())
    monkeypatch.undo()
    return batches


def test_batches_carry_no_bytes_of_earlier_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow's IPC writer (how Spark's Python worker ships a batch) pads a binary column's data
    to 64 bytes from the buffer beyond the rows when the buffer has them: the value column's
    buffer must end where its rows end, else leftover memory goes over the wire."""
    clean = coalesced(0x00, monkeypatch)
    assert [(b.column("topic")[0].as_py(), b.num_rows) for b in clean] == [("a", 6), ("b", 9)]
    assert ipc_bytes(coalesced(0xEE, monkeypatch)) == ipc_bytes(clean)
