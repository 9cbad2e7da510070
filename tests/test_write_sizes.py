"""The writer's request and message-set size arithmetic (pure): every set fits one request."""

from __future__ import annotations

import numpy as np

from kafka_pyspark.spark.write_sizes import cut_runs, message_limit, request_limit, set_limit


def offsets(sizes: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def test_cut_by_bytes_and_by_count() -> None:
    # 10-byte messages of 20, 20, 20, 20, 5 payload bytes: sets of at most 65 bytes
    off = offsets([20, 20, 20, 20, 5])
    assert list(cut_runs(off, 0, 5, 200, 65, 10)) == [(0, 2), (2, 4), (4, 5)]
    assert list(cut_runs(off, 0, 5, 200, 60, 10)) == [(0, 2), (2, 4), (4, 5)]
    assert list(cut_runs(off, 0, 5, 200, 59, 10)) == [(0, 1), (1, 2), (2, 3), (3, 5)]
    assert list(cut_runs(off, 0, 5, 200, 10_000, 10)) == [(0, 5)]
    assert list(cut_runs(off, 0, 5, 2, 10_000, 10)) == [(0, 2), (2, 4), (4, 5)]
    assert list(cut_runs(off, 1, 4, 200, 10_000, 10)) == [(1, 4)]
    # a row heavier than the bound is a run of its own (the caller names it)
    assert list(cut_runs(offsets([5, 100, 5]), 0, 3, 200, 50, 10)) == [(0, 1), (1, 2), (2, 3)]


def test_issue_8_sizes_fit_one_request() -> None:
    req = request_limit(1_000_000)
    assert req == 1_000_000 + 10 + 4 + 10 + 249 + (1 << 20)
    limit = set_limit(req, "t")
    assert limit == req - 4 - 10 - 1
    for size, n in ((500_000, 5), (100_000, 30), (20_000, 200), (7, 5000)):
        off = offsets([size] * n)
        runs = list(cut_runs(off, 0, n, 200, limit, 10))
        assert runs[0][0] == 0 and runs[-1][1] == n
        assert all(b - a <= 200 for a, b in runs)
        assert all(off[b] - off[a] + 10 * (b - a) <= limit for a, b in runs)
        # as few sets as the bound allows: each run but the last could not take one more row
        for a, b in runs[:-1]:
            assert b - a == 200 or off[b + 1] - off[a] + 10 * (b + 1 - a) > limit


def test_limits_near_the_broker_request_cap() -> None:
    assert request_limit(1) == 1 + 10 + 4 + 10 + 249 + (1 << 20)
    big = request_limit(2**31 - 1)
    assert big == 100 * 1024 * 1024  # 0.7.2 max.socket.request.bytes
    assert message_limit(2**31 - 1, big) == big - 4 - 10 - 249 - 10
    assert message_limit(1_000_000, request_limit(1_000_000)) == 1_000_000
