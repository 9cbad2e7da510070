"""SetBuilder.add_in_order: keyless runs cut into sets, several runs per encoder call.

Whatever the runs look like (full ``batch.size`` runs, long and short ones, runs joining rows a
target already buffers, across Arrow batches), every target gets its rows in input order, cut
into sets of ``batch.size`` (the last one short at the flush), each set byte for byte what the
encoder gives for those rows alone; and runs of ``batch.size`` rows to targets with nothing
buffered take one encoder call per Arrow batch, not one per set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kafka_pyspark._messages import encode_message_set_arrow
from kafka_pyspark._options import parse_write_options_only
from kafka_pyspark._wire import MULTIPRODUCE_HEADER_SIZE, produce_item_size
from kafka_pyspark._write.digest import SetDigest
from kafka_pyspark._write.rows import Targets
from kafka_pyspark._write.sets import SetBuilder
from kafka_pyspark._write.sizes import MESSAGE_OVERHEAD, SizeLimits

BATCH = 4


class _Recorder:
    def __init__(self, codec: str) -> None:
        self.opts = parse_write_options_only(
            {"compression.codec": codec, "batch.size": str(BATCH)}
        )
        self.targets = Targets()
        for p in range(3):
            self.targets.id(("t", 0, p))
        self.sets: list[tuple[int, bytes, int]] = []
        self.builder = SetBuilder(self.opts, self.targets, SizeLimits.of(1_000_000),
                                  self._queue, str, digests=True)
        self.calls = 0
        encode = self.builder._encode_many

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return encode(*args, **kwargs)

        self.builder._encode_many = counted

    def _queue(self, targets: list[int], sets: list[bytes | memoryview], counts: list[int],
               digests: list[SetDigest] | None) -> None:
        assert digests is not None and len(digests) == len(sets)
        self.sets += [(t, bytes(d), m) for t, d, m in zip(targets, sets, counts, strict=True)]


def _values(n: int, start: int = 0) -> pa.Array:
    return pa.array([b"row-%d-" % i + b"v" * (i % 7) for i in range(start, start + n)])


def _expected(codec: str, per_target: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    return {
        t: [encode_message_set_arrow(pa.array(vals[i:i + BATCH], pa.binary()),
                                     compression=codec)
            for i in range(0, len(vals), BATCH)]
        for t, vals in per_target.items()
    }


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
@pytest.mark.parametrize(
    "runs",
    [
        # (target, run length) per Arrow batch
        [[(0, 4), (1, 4), (0, 4), (2, 4)], [(1, 4), (1, 4)]],
        [[(0, 3), (1, 4), (0, 5), (2, 9)], [(2, 3), (0, 1), (1, 8), (0, 2)]],
        [[(0, 10)], [(0, 2), (1, 4), (0, 4)], [(0, 6)]],
        [[(1, 1), (2, 1), (1, 1)], [(1, 12), (2, 4), (1, 3)]],
        [[(0, 4), (1, 4), (0, 6)], [(0, 2), (2, 4), (1, 8)], [(2, 4), (0, 5)]],
    ],
)
def test_each_target_gets_its_rows_in_order_in_sets_of_batch_size(
    codec: str, runs: list[list[tuple[int, int]]]
) -> None:
    rec = _Recorder(codec)
    per_target: dict[int, list[bytes]] = {}
    base = 0
    for batch in runs:
        n = sum(length for _, length in batch)
        values = _values(n, base)
        dest = np.concatenate([np.full(length, t, np.int64) for t, length in batch])
        for t, v in zip(dest.tolist(), values.to_pylist(), strict=True):
            per_target.setdefault(t, []).append(v)
        rec.builder.add_in_order(values, dest, base)
        base += n
    rec.builder.flush()
    got: dict[int, list[bytes]] = {}
    counts: dict[int, list[int]] = {}
    for t, data, messages in rec.sets:
        got.setdefault(t, []).append(data)
        counts.setdefault(t, []).append(messages)
    assert got == _expected(codec, per_target)
    assert counts == {
        t: [min(BATCH, len(vals) - i) for i in range(0, len(vals), BATCH)]
        for t, vals in per_target.items()
    }


def test_full_runs_to_empty_buffers_take_one_encoder_call_per_batch() -> None:
    rec = _Recorder("none")
    for k in range(3):
        dest = np.repeat(np.array([0, 1, 2, 1, 0], np.int64), BATCH)
        rec.builder.add_in_order(_values(len(dest), k * len(dest)), dest, k * len(dest))
    assert rec.calls == 3
    assert len(rec.sets) == 15
    assert [t for t, _, _ in rec.sets[:5]] == [0, 1, 2, 1, 0]


def test_whole_runs_too_large_for_a_request_are_cut_by_bytes() -> None:
    # uncompressed, a set must fit one request: here three 10-byte messages (20 bytes each) do,
    # a full run of four does not, so each run of BATCH rows becomes a set of as many rows as
    # fit, then one of the rest
    rec = _Recorder("none")
    room = 3 * (10 + MESSAGE_OVERHEAD)
    rec.builder._limits = SizeLimits(
        1_000_000, MULTIPRODUCE_HEADER_SIZE + produce_item_size(len("t"), 0) + room
    )
    values = pa.array([b"%010d" % i for i in range(3 * BATCH)])
    dest = np.repeat(np.array([0, 1, 0], np.int64), BATCH)
    rec.builder.add_in_order(values, dest, 0)
    rows = values.to_pylist()
    cuts = [rows[j:j + 3] if n == 3 else rows[j + 3:j + 4]
            for j in range(0, len(rows), BATCH) for n in (3, 1)]
    assert [(t, m) for t, _, m in rec.sets] == [(0, 3), (0, 1), (1, 3), (1, 1), (0, 3), (0, 1)]
    assert [data for _, data, _ in rec.sets] == [
        encode_message_set_arrow(pa.array(c, pa.binary())) for c in cuts
    ]
