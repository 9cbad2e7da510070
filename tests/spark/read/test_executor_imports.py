"""What a fresh executor Python worker imports to read: not pandas.

Spark starts the Python workers of a data source read without pandas; ``pa.array`` (and
``from_pylist``, ``Schema.empty_table``) import it on first use, a heavy import in every fresh
worker. The read path builds its arrays from numpy buffers instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_SCRIPT = """
import sys
from kafka_pyspark._messages import decode_message_set, encode_message_set
from kafka_pyspark._messages.flat import ValueSink
from kafka_pyspark._spark.read.executor import _Coalescer, with_source_columns
values = [b"a" * 10, b"", b"ccc"] * 50
sets = [encode_message_set(values, compression=c) for c in ("none", "gzip", "snappy")]
out = _Coalescer(0, 100, 1 << 20)
rows = 0
for data in (*sets, sets[0] + sets[1]):  # the last: the general path (plain, then gzip)
    for sink in (None, out.sink):
        batch = decode_message_set(data, 7, sink=sink).batch
        rows += with_source_columns(batch, "t", 0, 1).num_rows
        rows += sum(b.num_rows for b in out.add("t", 1, batch))
rows += sum(b.num_rows for b in out.flush())
print(rows, "pandas" in sys.modules)
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_reading_does_not_import_pandas(pure: str) -> None:
    env = {**os.environ, "KAFKA_PYSPARK_PURE": pure}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    rows = (3 * 150 + 300) * 2 * 2  # each set without and with the sink, each batch twice
    assert done.stdout.split() == [str(rows), "False"]
