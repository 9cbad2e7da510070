"""The executor's batch coalescing (``spark/reader.py``): its byte count is Arrow's."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafka_pyspark.messages import decode_message_set, encode_message_set
from kafka_pyspark.messages.flat import ValueSink
from kafka_pyspark.spark.reader import _join, _nbytes

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
