"""The writer's request and message-set size arithmetic (pure): every set fits one request."""

from __future__ import annotations

import numpy as np

from kafka_pyspark import _wire as wire
from kafka_pyspark._wire.topics import MAX_TOPIC_BYTES
from kafka_pyspark._write.sizes import (
    MESSAGE_OVERHEAD,
    SizeLimits,
    cut_runs,
    message_limit,
    request_limit,
    set_limit,
)
from kafka_pyspark.client._framing import BROKER_MAX_REQUEST_BYTES


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


def test_a_set_at_the_limit_encodes_to_exactly_one_full_request() -> None:
    """The sizes come from the wire layer: a set of set_limit bytes makes a request body of
    exactly request_limit bytes, and the largest payload a message of exactly that set."""
    req = request_limit(1_000_000)
    for topic in ("t", "x" * MAX_TOPIC_BYTES):
        limit = set_limit(req, topic)
        item = wire.ProduceRequest(topic, 7, b"m" * limit)
        multi = wire.MultiProduceRequest((item,))
        assert len(wire.encode_request(multi)) - 4 == wire.produce_request_size(multi) == req
        # a lone PRODUCE has no TOPICPARTITION_COUNT
        assert len(wire.encode_request(item)) - 4 == wire.produce_request_size(item) == req - 2
        assert message_limit(2**31 - 1, req, topic) + MESSAGE_OVERHEAD == limit
    assert message_limit(1_000_000, req, "x" * MAX_TOPIC_BYTES) == 1_000_000


def test_one_decision_and_one_text_for_a_message_too_large() -> None:
    small = SizeLimits.of(1000)
    assert small.request_bytes == request_limit(1000)
    assert not small.message_over(1000, "t") and small.message_over(1001, "t")
    assert not small.message_over(1000) and small.message_over(1001)
    assert str(small.too_large("row 3 of task 1", "its message", 1001)) == (
        "row 3 of task 1: its message has a payload of 1001 bytes, over max.message.size (1000); "
        "a 0.7 broker would drop the whole message set silently"
    )
    # max.message.size beyond what one request can carry: the request is the limit, and it
    # depends on the topic's length (the rows' check assumes the longest topic)
    huge = SizeLimits.of(2**31 - 1)
    assert huge.request_bytes == BROKER_MAX_REQUEST_BYTES
    room_t = set_limit(BROKER_MAX_REQUEST_BYTES, "t") - MESSAGE_OVERHEAD
    assert huge.payload_limit("t") == room_t
    assert huge.payload_limit() == room_t - (MAX_TOPIC_BYTES - 1)
    assert not huge.message_over(room_t, "t") and huge.message_over(room_t + 1, "t")
    assert str(huge.too_large("row 0 of t", "its message", room_t + 1, "t")) == (
        f"row 0 of t: its message has a payload of {room_t + 1} bytes, over {room_t}, the most one "
        "request can carry within a 0.7 broker's max.socket.request.bytes "
        f"({BROKER_MAX_REQUEST_BYTES})"
    )
    # a set is held to the request only (its messages were checked one by one)
    assert not small.set_over(set_limit(small.request_bytes, "t"), "t")
    assert small.set_over(set_limit(small.request_bytes, "t") + 1, "t")
