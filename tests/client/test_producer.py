"""Producer (buffering, MULTIPRODUCE splitting, the delivery barrier) against scripted servers."""

from __future__ import annotations

import itertools
import socket

import pytest
from _bytes import message
from _client_servers import FakeBroker, ScriptedServer, read_request
from _kwargs import FAST

from kafka_pyspark import _wire as wire
from kafka_pyspark.client import DeliveryCount, Producer
from kafka_pyspark.client import _producer as producer_module
from kafka_pyspark.errors import DeliveryError, RequestTooLargeError


def test_flush_sends_one_request_per_broker_then_the_barrier() -> None:
    b0, b1 = FakeBroker(partitions=2), FakeBroker(partitions=3)
    m = [message(bytes([i]) * (i + 1)) for i in range(5)]
    with ScriptedServer(b0) as s0, ScriptedServer(b1) as s1:
        brokers = {0: (s0.host, s0.port), 1: (s1.host, s1.port)}
        with Producer(brokers, **FAST) as p:
            p.send(0, "t", 0, m[0])
            p.send(0, "t", 1, m[1])
            p.send(0, "t", 0, m[2])
            p.send(1, "t", 2, m[3])
            p.send(1, "t", 2, b"")  # empty sets are skipped
            assert p.buffered_bytes > 0
            got = p.flush()
            assert p.buffered_bytes == 0
            assert got == {
                ("t", 0, 0): DeliveryCount(2, len(m[0]) + len(m[2])),
                ("t", 0, 1): DeliveryCount(1, len(m[1])),
                ("t", 1, 2): DeliveryCount(1, len(m[3])),
            }
            assert p.flush() == {}  # nothing new
        assert [type(r).__name__ for r in s0.requests] == ["MultiProduceRequest", "OffsetsRequest"]
        assert [type(r).__name__ for r in s1.requests] == ["ProduceRequest", "OffsetsRequest"]
        assert s0.requests[1] == wire.OffsetsRequest("t", 0, -1, 1)
        assert b0.log("t", 0).segments == [m[0] + m[2]]
        assert b0.log("t", 1).segments == [m[1]]
        assert b1.log("t", 2).segments == [m[3]]


def test_requests_are_split_below_max_request_size_and_order_is_kept() -> None:
    b = FakeBroker()
    sets = [message(bytes([i]) * 50) for i in range(20)]  # 60 bytes each, 71 per item
    with ScriptedServer(b) as s, Producer({3: (s.host, s.port)}, max_request_size=300,
                                          **FAST) as p:
        for x in sets:
            p.send(3, "topic", 1, x)
        assert p.flush() == {("topic", 3, 1): DeliveryCount(20, 60 * 20)}
        produced = [r for r in s.requests if not isinstance(r, wire.OffsetsRequest)]
        assert len(produced) >= 5
        for r in produced:
            assert len(wire.encode_request(r)) - 4 <= 300
        assert b.log("topic", 1).segments == [b"".join(sets)]
        # Full buffers were written by send(); the barrier came once, last.
        assert isinstance(s.requests[-1], wire.OffsetsRequest)
        assert sum(isinstance(r, wire.OffsetsRequest) for r in s.requests) == 1


def test_a_request_full_of_items_is_written_and_order_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At the int16 item count's limit (made 3 here: the real one is 32,767) the buffer goes
    out as one request and the next set starts another; a lone set is a PRODUCE."""
    monkeypatch.setattr(producer_module, "MAX_MULTI_ITEMS", 3)
    b = FakeBroker(partitions=2)
    sets = [message(bytes([i]) * 10) for i in range(7)]
    with ScriptedServer(b) as s, Producer({0: (s.host, s.port)}, **FAST) as p:
        for i, x in enumerate(sets):
            p.send(0, "t", i % 2, x)
        assert p.flush() == {("t", 0, 0): DeliveryCount(4, 4 * len(sets[0])),
                             ("t", 0, 1): DeliveryCount(3, 3 * len(sets[0]))}
        shapes = [len(r.produces) if isinstance(r, wire.MultiProduceRequest) else type(r).__name__
                  for r in s.requests]
        assert shapes == [3, 3, "ProduceRequest", "OffsetsRequest"]
    assert b.log("t", 0).segments == [sets[0] + sets[2] + sets[4] + sets[6]]
    assert b.log("t", 1).segments == [sets[1] + sets[3] + sets[5]]


def test_a_message_set_larger_than_a_request_is_refused() -> None:
    with Producer({0: ("127.0.0.1", 1)}, max_request_size=100) as p:
        with pytest.raises(RequestTooLargeError, match="topic 't' partition 0 on broker 0"):
            p.send(0, "t", 0, b"x" * 200)
        with pytest.raises(ValueError, match="unknown broker id 5"):
            p.send(5, "t", 0, b"x")


def test_barrier_failure_on_one_broker_reports_unconfirmed_and_confirmed() -> None:
    def closes_on_barrier(sock: socket.socket, srv: ScriptedServer) -> None:
        while True:
            req = read_request(sock)
            if req is None or isinstance(req, wire.OffsetsRequest):
                return
            srv.record(req)

    good = FakeBroker()
    m = message(b"payload")
    with ScriptedServer(good) as s0, ScriptedServer(closes_on_barrier) as s1:
        p = Producer({0: (s0.host, s0.port), 1: (s1.host, s1.port)}, **FAST)
        p.send(0, "t", 0, m)
        p.send(1, "t", 1, m)
        p.send(1, "t", 1, m)
        with pytest.raises(DeliveryError) as ei:
            p.flush()
        e = ei.value
        assert e.confirmed == {("t", 0, 0): (1, len(m))}
        assert e.unconfirmed == {("t", 1, 1): (2, 2 * len(m))}
        assert "broker 1" in str(e) and "may not have been appended" in str(e)
        assert "t/broker 1/partition 1: 2 message sets" in str(e)
        # The producer is usable again; the failure was reported once.
        p.send(0, "t", 0, m)
        assert p.flush() == {("t", 0, 0): DeliveryCount(1, len(m))}
        p.close()


def test_unreachable_broker_is_unconfirmed() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with Producer({2: ("127.0.0.1", port)}, **FAST) as p:
        p.send(2, "t", 0, message(b"a"))
        with pytest.raises(DeliveryError, match="cannot connect") as ei:
            p.flush()
        assert ei.value.unconfirmed == {("t", 2, 0): (1, len(message(b"a")))}
        assert ei.value.confirmed == {}


def test_barrier_uses_a_real_partition_for_random_partition_produce() -> None:
    b = FakeBroker()
    with ScriptedServer(b) as s, Producer({0: (s.host, s.port)}, **FAST) as p:
        p.send(0, "t", -1, message(b"r"))
        p.flush()
        assert s.requests[-1] == wire.OffsetsRequest("t", 0, -1, 1)


def test_memoryviews_of_one_buffer_are_sent_as_they_are() -> None:
    """The encoder's sets are views of one bytes object: send() keeps them (no copy) and the
    request holds their bytes, single PRODUCE and MULTIPRODUCE alike."""
    m = [message(b"v%d" % i) for i in range(5)]
    whole = memoryview(b"".join(m))
    ends = [0]
    for x in m:
        ends.append(ends[-1] + len(x))
    views = [whole[a:b] for a, b in itertools.pairwise(ends)]
    b0, b1 = FakeBroker(), FakeBroker()
    with ScriptedServer(b0) as s0, ScriptedServer(b1) as s1, Producer(
        {0: (s0.host, s0.port), 1: (s1.host, s1.port)}, **FAST
    ) as p:
        for i, view in enumerate(views[:4]):
            p.send(0, "t", i % 2, view)
        p.send(1, "t", 0, views[4])
        assert p.flush() == {
            ("t", 0, 0): DeliveryCount(2, len(m[0]) + len(m[2])),
            ("t", 0, 1): DeliveryCount(2, len(m[1]) + len(m[3])),
            ("t", 1, 0): DeliveryCount(1, len(m[4])),
        }
    assert b0.log("t", 0).segments == [m[0] + m[2]]
    assert b0.log("t", 1).segments == [m[1] + m[3]]
    assert b1.log("t", 0).segments == [m[4]]
