"""iter_range / iter_multi_range / probe_partition_count / offsets helpers on a scripted broker.

The fake broker (test_client_servers.FakeBroker) answers as a measured 0.7.2 broker
does (docs/dev/PROTOCOL.md "A real 0.7.2 broker, measured"): no FETCH crosses a segment, a FETCH at
a segment's end reads the next segment, only "visible" (flushed) bytes are served, truncated bodies
at max size.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from _bytes import message
from _client_servers import FakeBroker, FakeLog, ScriptedServer, read_request

from kafka_pyspark import _wire as wire
from kafka_pyspark.client import (
    BrokerConnection,
    FetchSettings,
    OffsetRange,
    before_time,
    earliest,
    iter_multi_range,
    iter_range,
    latest,
    probe_partition_count,
    segment_starts,
)
from kafka_pyspark.errors import (
    BrokerError,
    DataNotAvailableError,
    FetchSizeTooSmallError,
    InvalidFetchSizeError,
    InvalidMessageError,
    InvalidMessageSizeError,
    MessageError,
    OffsetOutOfRangeError,
    UnknownCodeError,
    UnknownError,
    WrongPartitionError,
)


def payloads(n: int, size: int = 10) -> list[bytes]:
    return [bytes([65 + i % 26]) * (size + i % 7) for i in range(n)]


def log_of(values: list[bytes], per_segment: int) -> tuple[list[bytes], list[int]]:
    """Segments holding ``per_segment`` messages each, and every message's offset."""
    segs, offsets, pos = [], [], 0
    for i in range(0, len(values), per_segment):
        seg = b""
        for v in values[i : i + per_segment]:
            offsets.append(pos + len(seg))
            seg += message(v)
        segs.append(seg)
        pos += len(seg)
    return segs, offsets


Fake = tuple[FakeBroker, ScriptedServer, BrokerConnection]


@pytest.fixture
def fake() -> Iterator[Fake]:
    broker = FakeBroker(partitions=3)
    with ScriptedServer(broker) as srv, BrokerConnection(
        srv.host, srv.port, timeout=2.0, retries=1, backoff=0.001, broker_id=4
    ) as conn:
        yield broker, srv, conn


def rows(results: Any) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for r in results:
        b = r.batch
        out += zip(b.column("offset").to_pylist(), b.column("value").to_pylist(), strict=True)
    return out


def test_range_across_segments_and_fetches(fake: Fake) -> None:
    broker, srv, conn = fake
    values = payloads(40)
    segs, offsets = log_of(values, 7)
    broker.log("t", 1).segments = segs
    end = sum(map(len, segs))
    results = list(iter_range(conn, "t", 1, 0, end, FetchSettings(fetch_size=64)))
    assert rows(results) == list(zip(offsets, values, strict=True))
    assert results[-1].next_offset == end
    for a, b in itertools.pairwise(results):
        assert b.batch.column("offset")[0].as_py() == a.next_offset  # no gap, no overlap
    assert max(broker.fetch_sizes) <= 64  # memory bounded by the fetch size
    fetches = [r for r in srv.requests if isinstance(r, wire.FetchRequest)]
    assert fetches[0].offset == 0 and all(f.offset < end for f in fetches)


def test_sub_ranges_stop_at_end(fake: Fake) -> None:
    broker, _, conn = fake
    values = payloads(10)
    segs, offsets = log_of(values, 4)
    broker.log("t", 0).segments = segs
    # Exact boundaries.
    got = rows(iter_range(conn, "t", 0, offsets[2], offsets[7], FetchSettings(fetch_size=1000)))
    assert got == list(zip(offsets[2:7], values[2:7], strict=True))
    # An end inside message 7: it starts before the end, so it is read whole.
    got = rows(iter_range(conn, "t", 0, offsets[3], offsets[7] + 3, FetchSettings(fetch_size=1000)))
    assert got == list(zip(offsets[3:8], values[3:8], strict=True))
    assert list(iter_range(conn, "t", 0, offsets[5], offsets[5])) == []


def test_partial_tails_are_refetched(fake: Fake) -> None:
    broker, _, conn = fake
    values = payloads(25, size=30)
    segs, offsets = log_of(values, 25)
    broker.log("t", 2).segments = segs
    for fetch_size in (37, 50, 101):  # never aligned with message boundaries
        got = rows(iter_range(conn, "t", 2, 0, len(segs[0]), FetchSettings(fetch_size=fetch_size)))
        assert got == list(zip(offsets, values, strict=True))


def test_big_message_doubles_the_fetch_size_then_returns(fake: Fake) -> None:
    broker, _, conn = fake
    values = [b"a" * 10, b"B" * 1000, b"c" * 10, b"d" * 10]
    segs, offsets = log_of(values, 10)
    broker.log("t", 0).segments = segs
    got = rows(iter_range(conn, "t", 0, 0, len(segs[0]),
                          FetchSettings(fetch_size=64, max_fetch_size=4096)))
    assert got == list(zip(offsets, values, strict=True))
    # 64 (a + part of B) -> 64 (B: 1010 bytes) -> 1024 -> back to 64 (40 left).
    assert broker.fetch_sizes == [64, 64, 1024, 40]


def test_tiny_fetch_size_still_works(fake: Fake) -> None:
    broker, _, conn = fake
    values = payloads(3)
    segs, offsets = log_of(values, 3)
    broker.log("t", 0).segments = segs
    got = rows(iter_range(conn, "t", 0, 0, len(segs[0]),
                          FetchSettings(fetch_size=1, max_fetch_size=64)))
    assert got == list(zip(offsets, values, strict=True))


def test_message_over_max_fetch_size(fake: Fake) -> None:
    broker, _, conn = fake
    segs, offsets = log_of([b"a" * 10, b"Z" * 5000], 10)
    broker.log("big", 1).segments = segs
    it = iter_range(conn, "big", 1, 0, len(segs[0]),
                    FetchSettings(fetch_size=64, max_fetch_size=1024))
    assert rows([next(it)]) == [(0, b"a" * 10)]
    with pytest.raises(FetchSizeTooSmallError) as ei:
        next(it)
    msg = str(ei.value)
    for part in ("topic 'big'", "broker 4", "partition 1", f"offset {offsets[1]}", "5010 bytes",
                 "max.fetch.size (1024 bytes)"):
        assert part in msg


def test_offset_out_of_range_is_typed_with_context(fake: Fake) -> None:
    broker, _, conn = fake
    broker.log("t", 0).segments = [message(b"x")]
    with pytest.raises(OffsetOutOfRangeError) as ei:
        list(iter_range(conn, "t", 0, 100, 200))
    msg = str(ei.value)
    assert "topic 't', broker 4, partition 0, offset 100" in msg
    assert f"127.0.0.1:{conn.port}" in msg


def test_wrong_partition_is_typed(fake: Fake) -> None:
    _, _, conn = fake
    with pytest.raises(WrongPartitionError, match="partition 9"):
        list(iter_range(conn, "t", 9, 0, 10))


@pytest.mark.parametrize(
    ("code", "cls"),
    [(-1, UnknownError), (1, OffsetOutOfRangeError), (2, InvalidMessageError),
     (3, WrongPartitionError), (4, InvalidFetchSizeError), (77, UnknownCodeError)],
)
def test_every_fetch_error_code_is_mapped(code: int, cls: type[BrokerError]) -> None:
    def handler(sock: socket.socket, srv: ScriptedServer) -> None:
        while read_request(sock) is not None:
            sock.sendall(wire.encode_fetch_response(code, b""))

    with ScriptedServer(handler) as srv, BrokerConnection(srv.host, srv.port, timeout=2,
                                                             broker_id=1) as c:
        assert c.fetch("t", 0, 0, 10).error == code  # fetch() keeps the code
        with pytest.raises(cls) as ei:
            list(iter_range(c, "t", 0, 0, 10))
        assert ei.value.code == code
        assert "topic 't', broker 1, partition 0, offset 0" in str(ei.value)


def test_empty_answer_before_end_fails_after_bounded_retries(fake: Fake) -> None:
    broker, srv, conn = fake
    values = payloads(4)
    segs, offsets = log_of(values, 4)
    broker.log("t", 0).segments = segs
    broker.log("t", 0).visible = offsets[2]  # flushed up to message 2 only
    it = iter_range(conn, "t", 0, 0, len(segs[0]), FetchSettings(empty_retries=2))
    with pytest.raises(DataNotAvailableError) as ei:
        rows(it)
    msg = str(ei.value)
    assert f"offset {offsets[2]}" in msg and "3 fetches" in msg and "flushed" in msg
    assert f"latest (flushed) offset is {len(segs[0])}" in msg
    empty = [r for r in srv.requests if isinstance(r, wire.FetchRequest) and r.offset == offsets[2]]
    assert len(empty) == 3


def test_data_becoming_visible_is_read(fake: Fake) -> None:
    broker, _, conn = fake
    values = payloads(4)
    segs, offsets = log_of(values, 4)

    class Flushing(FakeLog):
        def read(self, offset: int, max_size: int) -> tuple[int, bytes]:
            got = super().read(offset, max_size)
            if got == (0, b""):
                self.visible = None  # the flush scheduler ran
            return got

    lg = Flushing(segs)
    lg.visible = offsets[1]
    broker.logs[("t", 0)] = lg
    got = rows(iter_range(conn, "t", 0, 0, len(segs[0]), FetchSettings(fetch_size=1000)))
    assert got == list(zip(offsets, values, strict=True))


def test_offset_inside_a_message_fails_clearly(fake: Fake) -> None:
    broker, _, conn = fake
    segs, _ = log_of([b"x" * 40, b"y" * 40], 10)
    broker.log("t", 0).segments = segs
    with pytest.raises((MessageError, FetchSizeTooSmallError)) as ei:
        list(iter_range(conn, "t", 0, 5, len(segs[0]),
                        FetchSettings(fetch_size=1000, max_fetch_size=4096)))
    assert "topic 't', broker 4, partition 0" in str(ei.value)


def test_short_answer_inside_a_message_is_not_waited_for(fake: Fake) -> None:
    broker, srv, conn = fake
    broker.log("t", 0).segments = [message(b"x" * 100)]
    # From offset 1 the "length" is 00 00 6a 01 = 27137: past everything the broker has.
    with pytest.raises(InvalidMessageSizeError, match="not the start of a message") as ei:
        list(iter_range(conn, "t", 0, 1, 110,
                        FetchSettings(fetch_size=1000, max_fetch_size=1 << 20)))
    assert ei.value.offset == 1
    assert "announces 27141 bytes" in str(ei.value)
    assert len(srv.requests) == 2  # the first answer was full (doubling), the second short


def test_multi_range(fake: Fake) -> None:
    broker, srv, conn = fake
    va, vb, vc = payloads(30), payloads(5, size=200), payloads(12, size=3)
    sa, oa = log_of(va, 8)
    sb, ob = log_of(vb, 5)
    sc, oc = log_of(vc, 4)
    broker.log("a", 0).segments = sa
    broker.log("b", 1).segments = sb
    broker.log("a", 2).segments = sc
    ranges = [
        OffsetRange("a", 4, 0, 0, sum(map(len, sa))),
        OffsetRange("b", 4, 1, 0, len(sb[0])),
        OffsetRange("a", 4, 2, oc[3], oc[9]),
        OffsetRange("a", 4, 2, oc[9], oc[9]),  # empty
    ]
    per: dict[int, list[Any]] = {0: [], 1: [], 2: [], 3: []}
    for i, r in iter_multi_range(conn, ranges, FetchSettings(fetch_size=100, max_fetch_size=1000)):
        per[i].append(r)
    assert rows(per[0]) == list(zip(oa, va, strict=True))
    assert rows(per[1]) == list(zip(ob, vb, strict=True))  # each message > fetch size
    assert rows(per[2]) == list(zip(oc[3:9], vc[3:9], strict=True))
    assert per[3] == []
    assert any(isinstance(r, wire.MultiFetchRequest) for r in srv.requests)


def test_multi_range_respects_the_response_limit(fake: Fake) -> None:
    broker, srv, conn = fake
    vals = payloads(10)
    for p in range(3):
        broker.log("m", p).segments = log_of(vals, 10)[0]
    n = len(broker.log("m", 0).segments[0])
    ranges = [OffsetRange("m", 4, p, 0, n) for p in range(3)]
    got = list(iter_multi_range(conn, ranges, FetchSettings(fetch_size=60, max_response_size=130)))
    for p in range(3):
        assert rows(r for i, r in got if i == p) == list(
            zip(log_of(vals, 10)[1], vals, strict=True)
        )
    for r in srv.requests:
        if isinstance(r, wire.MultiFetchRequest):
            assert sum(f.max_size for f in r.fetches) <= 130


def test_multi_range_errors_are_typed(fake: Fake) -> None:
    broker, _, conn = fake
    broker.log("t", 0).segments = [message(b"x")]
    with pytest.raises(OffsetOutOfRangeError, match="partition 0, offset 50"):
        list(iter_multi_range(conn, [OffsetRange("t", 4, 0, 0, 5), OffsetRange("t", 4, 0, 50, 60)]))


def test_probe_partition_count_uses_fetch_only(fake: Fake) -> None:
    _, srv, conn = fake
    assert probe_partition_count(conn, "anything") == 3
    fetches = [r for r in srv.requests if isinstance(r, wire.FetchRequest)]
    assert fetches == srv.requests and all(r.max_size == 0 for r in fetches)
    assert [r.partition for r in fetches] == [0, 1, 2, 3]
    with pytest.raises(Exception, match="probe limit"):
        probe_partition_count(conn, "anything", limit=2)


def test_offsets_helpers(fake: Fake) -> None:
    broker, _, conn = fake
    segs, _ = log_of(payloads(9), 3)
    broker.log("t", 0).segments = segs
    starts = [0, len(segs[0]), len(segs[0]) + len(segs[1])]
    end = sum(map(len, segs))
    assert segment_starts(conn, "t", 0) == (starts, end)
    assert segment_starts(conn, "t", 0).end == end
    assert latest(conn, "t", 0) == end
    assert earliest(conn, "t", 0) == 0
    assert before_time(conn, "t", 0, 1) == end  # the fake ignores time
    assert segment_starts(conn, "empty", 1) == ([], 0)
