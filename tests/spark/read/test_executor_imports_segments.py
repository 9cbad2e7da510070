"""What a fresh executor Python worker imports to read segment files: not pandas.

The sibling of ``test_executor_imports.py`` for ``format("kafka07").option("path", ...)``:
decoding a 0.7 ``.kafka`` file and a later ``.log`` file (message sets v0/v1 and record
batches v2, with and without headers, timestamps null and not, compressed and not, a
transaction) builds its Arrow arrays from numpy buffers, never by ``pa.array``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from segment_builder import GZIP, batch, control_record, message, record, wrapper
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._segments.files import discover, open_filesystem
from kafka_pyspark._segments.reading import ReadSettings, ReadStop, SegmentSplit, iter_split
from kafka_pyspark._spark.read.segment_files import with_segment_columns
d = Path(sys.argv[1]) / "t-0"
d.mkdir()
(d / "00000000000000000000.kafka").write_bytes(
    encode_message_set([b"a", b"bb"]) + encode_message_set([b"c", b""], compression="gzip"))
(d / "00000000000000000000.log").write_bytes(
    message(0, b"m0", key=b"k")
    + wrapper(1, [message(0, b"m1", magic=1, timestamp=5),
                  message(1, b"m2", magic=1, timestamp=-1)], GZIP, magic=1, timestamp=6)
    + batch(3, [record(0, b"r3", key=b"k3"), record(1, None, timestamp_delta=-1)])
    + batch(5, [record(0, b"r5", headers=[("h", b"x"), ("g", None)])], codec=GZIP)
    + batch(6, [record(0, b"t6")], transactional=True, producer_id=9, producer_epoch=0)
    + batch(7, [control_record(True)], transactional=True, control=True, producer_id=9,
            producer_epoch=0))
rows = []
for f in sorted(discover(*open_filesystem(str(d))), key=lambda f: f.kind):
    for item in iter_split(open_filesystem(str(d))[0], SegmentSplit(f, 0, f.size),
                           ReadSettings()):
        if not isinstance(item, ReadStop):
            rows.append(with_segment_columns(item, "t", 0, 0).num_rows)
print(*rows, "pandas" in sys.modules)
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_reading_segments_does_not_import_pandas(pure: str, tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_PYSPARK_PURE": pure}
    here = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path), here], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the .kafka file (4 messages), then the .log file (7 user records: the control record
    # and nothing else left out)
    assert done.stdout.split() == ["4", "7", "False"]


def test_array_helpers_match_pa_array() -> None:
    """The helpers the decoders use instead of ``pa.array``: the same arrays (here, in the test
    process, ``pa.array`` is the reference)."""
    import numpy as np
    import pyarrow as pa

    from kafka_pyspark._formats.batch_layout import TIMESTAMP_TYPE
    from kafka_pyspark._messages.arrays import binary_array, bool_array, int_array

    ms = np.array([5, 0, -7], dtype=np.int64)
    valid = np.array([True, False, True])
    got = int_array(ms, valid, TIMESTAMP_TYPE)
    assert got.equals(pa.array(ms, TIMESTAMP_TYPE, mask=~valid))
    assert got.null_count == 1 and got.to_pylist()[1] is None
    assert int_array(ms, np.ones(3, dtype=bool)).null_count == 0
    assert binary_array([b"a", None, b"", b"cd"]).equals(
        pa.array([b"a", None, b"", b"cd"], pa.binary()))
    assert binary_array([]).equals(pa.array([], pa.binary()))
    keep = np.array([True, False] * 5 + [True])
    assert bool_array(keep).equals(pa.array(keep))
    with pytest.raises(TypeError, match="int32 values cannot make an Arrow timestamp"):
        int_array(np.zeros(1, dtype=np.int32), kind=TIMESTAMP_TYPE)
