"""``compression.level`` reaches the encoder: SetBuilder's gzip wrappers are deflated at it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kafka_pyspark._messages import decode_message_set
from kafka_pyspark._options import parse_write_options_only
from kafka_pyspark._write.rows import Targets
from kafka_pyspark._write.sets import SetBuilder
from kafka_pyspark._write.sizes import SizeLimits


def _sets(options: dict[str, str], values: list[bytes]) -> list[bytes]:
    opts = parse_write_options_only(options)
    targets = Targets()
    target = targets.id(("t", 0, 0))
    got: list[bytes] = []

    def queue(ts: list[int], sets: list[bytes | memoryview], counts: list[int],
              digests: object) -> None:
        assert set(ts) == {target}
        got.extend(bytes(data) for data in sets)

    builder = SetBuilder(opts, targets, SizeLimits.of(opts.max_message_size), queue, str)
    builder.add_in_order(pa.array(values), np.zeros(len(values), np.int64), 0)
    builder.flush()
    return got


def test_level_reaches_the_gzip_wrappers() -> None:
    values = [b'{"row": %d, "text": "%s"}' % (i, b"abc" * (i % 30)) for i in range(450)]
    gzip = {"compression.codec": "gzip", "batch.size": "200"}
    stored = _sets({**gzip, "compression.level": "0"}, values)
    default = _sets(gzip, values)
    fast = _sets({**gzip, "compression.level": "1"}, values)
    assert [len(s) > len(d) for s, d in zip(stored, default, strict=True)] == [True] * 3
    assert stored != fast != default
    for sets in (stored, default, fast):
        decoded = [decode_message_set(s).batch.column("value").to_pylist() for s in sets]
        assert decoded == [values[:200], values[200:400], values[400:]]
