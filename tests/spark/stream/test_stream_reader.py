"""Kafka07StreamReader driven directly (no Spark session): real ZooKeeper and brokers.

Spark calls these methods from its streaming source worker; calling them here makes the
offset decisions (topology, admission, data loss, group commits) checkable exactly and fast.
The end-to-end behaviour under Spark is in ``test_spark_stream.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _cluster import kafka_partitions, send, values

from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._spark.compat import ReadAllAvailable, ReadMaxBytes
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark._spark.stream.admission import MAX_ROUNDS
from kafka_pyspark._spark.stream.prefetch import THREAD_NAME
from kafka_pyspark._spark.stream.reader import Kafka07StreamReader
from kafka_pyspark._spark.stream.scan import HEADER
from kafka_pyspark._wire import FetchRequest, FetchResponse
from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.errors import DataLossError, OffsetFormatError, OptionError
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk


_MADE: list[Kafka07StreamReader] = []


def make(zk: str, **options: str) -> Kafka07StreamReader:
    opts = {"zk.connect": zk, **options}
    reader = Kafka07StreamReader(opts, READ_SCHEMA)
    _MADE.append(reader)
    return reader


@pytest.fixture(autouse=True)
def _stopped() -> Iterator[None]:
    """Every reader a test made is stopped after it (as Spark stops a source): a reader left
    running keeps its ZooKeeper session's thread alive, which draws from ``random`` while a
    later module's Hypothesis tests generate data."""
    yield
    while _MADE:
        _MADE.pop().stop()


@pytest.fixture
def topic() -> str:
    return f"r{uuid.uuid4().hex[:8]}"


def read_all(
    reader: Kafka07StreamReader, start: dict[str, Any], end: dict[str, Any]
) -> pa.Table:
    batches = [b for part in reader.partitions(start, end) for b in reader.read(part)]
    if not batches:
        return pa.table({f.name: [] for f in READ_SCHEMA.fields})
    return pa.Table.from_batches(batches)


def test_initial_offsets_and_read(broker: EmbeddedBroker, zk_connect: str, topic: str) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    send(broker, topic, 1, encode_message_set(values("b", 5), compression="gzip"))
    end0 = broker.log_end(topic, 0)
    end1 = broker.log_end(topic, 1)

    latest = make(zk_connect, subscribe=topic)  # default: latest
    assert latest.initialOffset() == {topic: {"0-0": end0, "0-1": end1}}
    assert latest.getDefaultReadLimit() == ReadAllAvailable()

    r = make(zk_connect, subscribe=topic, startingOffsets="earliest")
    start = r.initialOffset()
    assert start == {topic: {"0-0": 0, "0-1": 0}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0-0": end0, "0-1": end1}}
    assert r.reportLatestOffset() == end
    t = read_all(r, start, end)
    assert sorted(t.column("value").to_pylist()) == values("a", 10) + values("b", 5)
    # nothing new: the same offset comes back (Spark then runs no micro-batch)
    assert r.latestOffset(end, ReadAllAvailable()) == end
    assert r.partitions(end, end) == []

    r.stop()
    latest.stop()


def test_json_and_group_starting_offsets(
    broker: EmbeddedBroker, zk_connect: str, topic: str, kz: Any
) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    spec = f'{{"{topic}": {{"0-0": 60, "0-1": -2}}}}'
    r = make(zk_connect, subscribe=topic, startingOffsets=spec)
    assert r.initialOffset() == {topic: {"0-0": 60, "0-1": 0}}
    kz.create(f"/consumers/g1/offsets/{topic}/0-0", b"120", makepath=True)
    g = make(zk_connect, subscribe=topic, startingOffsets="group", **{"group.id": "g1"})
    assert g.initialOffset() == {topic: {"0-0": 120, "0-1": 0}}  # never committed: earliest
    with pytest.raises(OptionError, match=r"group\.id"):
        make(zk_connect, subscribe=topic, startingOffsets="group")
    with pytest.raises(OptionError, match="endingOffsets"):
        make(zk_connect, subscribe=topic, endingOffsets="latest")


Asked = list[list[tuple[int, int, int]]]  # per MULTIFETCH: (partition, offset, max_size)


def spy_multifetch(monkeypatch: pytest.MonkeyPatch) -> Asked:
    """Record every MULTIFETCH this process sends: what the driver's boundary scans cost."""
    asked: Asked = []
    real = BrokerConnection.multifetch

    def spy(self: BrokerConnection, fetches: Sequence[FetchRequest]) -> list[FetchResponse]:
        asked.append([(f.partition, f.offset, f.max_size) for f in fetches])
        return real(self, fetches)

    monkeypatch.setattr(BrokerConnection, "multifetch", spy)
    return asked


def test_max_bytes_cuts_at_message_boundaries(
    broker: EmbeddedBroker, zk_connect: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = spy_multifetch(monkeypatch)
    # the algorithm's own scans, each in the micro-batch that needs it (the prefetch of the
    # next micro-batch's windows: test_prefetched_scans_*)
    monkeypatch.setattr(Kafka07StreamReader, "prefetch_scans", False)
    # partition 0: 100 messages of 40 bytes (30 + 10 header); partition 1: one 5000-byte
    # gzip wrapper, then small ones
    send(broker, topic, 0, encode_message_set(values("a", 100)))
    big = encode_message_set([bytes(range(256)) * 40], compression="none")
    send(broker, topic, 1, big + encode_message_set(values("b", 3)))
    r = make(zk_connect, subscribe=topic, startingOffsets="earliest", maxBytesPerTrigger="1000")
    assert r.getDefaultReadLimit() == ReadMaxBytes(1000)
    start = r.initialOffset()
    seen: list[bytes] = []
    sizes = []
    scans: list[Asked] = []  # the driver's scan round trips, per micro-batch
    for _ in range(50):
        asked.clear()
        end = r.latestOffset(start, ReadMaxBytes(1000))
        if end == start:
            break
        scans.append(list(asked))
        admission = r.last_admission
        assert admission is not None
        assert admission.scanned_bytes == sum(n for rt in asked for _, _, n in rt)
        e, s = end[topic], start[topic]
        moved = {k: e[k] - s[k] for k in e if e[k] != s[k]}
        total = sum(moved.values())
        sizes.append(total)
        if total > 1000:  # only the single oversize message, alone
            assert moved == {"0-1": len(big)}
        t = read_all(r, start, end)
        # every message read ends exactly at a micro-batch end or inside the range
        for key, e in end[topic].items():
            rows = [x for x in t.to_pylist() if f"{x['broker']}-{x['partition']}" == key]
            if rows:
                assert max(x["next_offset"] for x in rows) == e
                assert min(x["offset"] for x in rows) == start[topic][key]
        seen.extend(t.column("value").to_pylist())
        start = end
    assert sorted(seen) == sorted([*values("a", 100), bytes(range(256)) * 40, *values("b", 3)])
    assert len(sizes) >= 5
    assert sum(1 for s in sizes if s > 1000) == 1
    # fair: the first micro-batch split the budget across both partitions... unless the
    # oversize message went alone first; either way every batch is full to within a message
    assert all(s >= 1000 - 2 * 40 or s > 1000 for s in sizes[:-1])
    # the cut costs header-only scans, never a read of the data: micro-batch 1 water-fills
    # 500 bytes to each partition and scans [cur, cur + share + 4) of each; 0-0 cuts at 480
    # (12 messages of 40), 0-1's 10250-byte message does not fit; round 2 gives the 520 left
    # to 0-0: [480, 1004), cut at 1000. Micro-batch 2: 0-1 starved, a 4-byte window at its
    # head shows the message is larger than the budget, so it goes alone, never fetched here.
    assert scans[:2] == [[[(0, 0, 504), (1, 0, 504)], [(0, 480, 524)]], [[(1, 0, 4)]]]
    for batch_scans in scans:  # each round trip: at most the budget + a header per partition
        assert len(batch_scans) <= MAX_ROUNDS + 2  # + starved heads + the progress rule
        assert all(sum(n for _, _, n in rt) <= 1000 + 2 * HEADER for rt in batch_scans)


def test_prefetched_scans_same_ends_off_the_critical_path(
    broker: EmbeddedBroker, zk_connect: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With maxBytesPerTrigger, the next micro-batch's first-round windows are scanned in the
    background after each latestOffset: the ends are exactly those chosen without the
    prefetch, latestOffset itself no longer asks for those windows, stop() ends the thread."""
    import threading

    where: list[tuple[str, list[tuple[int, int, int]]]] = []  # (thread, MULTIFETCH parts)
    real = BrokerConnection.multifetch

    def spy(self: BrokerConnection, fetches: Sequence[FetchRequest]) -> list[FetchResponse]:
        parts = [(f.partition, f.offset, f.max_size) for f in fetches]
        where.append((threading.current_thread().name, parts))
        return real(self, fetches)

    monkeypatch.setattr(BrokerConnection, "multifetch", spy)
    send(broker, topic, 0, encode_message_set(values("a", 60)))  # 40-byte messages
    send(broker, topic, 1, encode_message_set(values("b", 60)))
    opts = {"subscribe": topic, "startingOffsets": "earliest", "maxBytesPerTrigger": "1000"}
    plain, fetched = make(zk_connect, **opts), make(zk_connect, **opts)
    plain.prefetch_scans = False
    starts = [plain.initialOffset(), fetched.initialOffset()]
    batches = 0
    sizes: list[int] = []
    while True:
        ends = [plain.latestOffset(starts[0], ReadMaxBytes(1000))]
        where.clear()
        ends.append(fetched.latestOffset(starts[1], ReadMaxBytes(1000)))
        assert ends[1] == ends[0]
        if ends[0] == starts[0]:
            break
        batches += 1
        main = [parts for name, parts in where if name == threading.current_thread().name]
        admission = fetched.last_admission
        assert admission is not None
        rounds = admission.windows
        sizes.append(sum(e - starts[0][topic][k] for k, e in ends[0][topic].items()))
        if rounds:
            first = [(tp[2], lo, hi - lo) for tp, (lo, hi) in sorted(rounds[0].items())]
            # micro-batch 1 scans its first round itself; later ones find it prefetched
            assert (first in main) == (batches == 1)
            assert len(main) == len(rounds) - (batches > 1)
        else:  # the rest fits: no scan at all
            assert main == []
        starts = ends
    # round 1: 500 bytes each, cut at 480 (12 messages); the 40 left: one more message
    assert sizes == [1000, 1000, 1000, 1000, 800]
    assert fetched.offsets.prefetches == 3  # after micro-batches 1-3: more left than fits
    fetched.stop()
    plain.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def test_offsets_connections_kept_between_micro_batches_until_a_broker_moves(
    tmp_path: Path, zk_connect: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_pyspark.client import _brokers
    from kafka_pyspark.testing._zookeeper import free_port

    opened: list[tuple[int, int]] = []  # (broker id, port) of every broker connection made
    conns: list[BrokerConnection] = []
    real = _brokers.open_connection

    sending = [False]  # the test's own producer opens its connections the same way

    def spy(broker_id: int, host: str, port: int, *args: Any) -> BrokerConnection:
        conn = real(broker_id, host, port, *args)
        if not sending[0]:
            opened.append((broker_id, port))
            conns.append(conn)
        return conn

    def produce(b: EmbeddedBroker, *args: Any) -> None:
        sending[0] = True
        try:
            send(b, *args)
        finally:
            sending[0] = False

    monkeypatch.setattr(_brokers, "open_connection", spy)
    log_dir = tmp_path / "b0"
    first, second = free_port(), free_port()
    with EmbeddedBroker(0, port=first, log_dir=log_dir, zk_connect=zk_connect) as b0:
        produce(b0, topic, 0, encode_message_set(values("a", 5)))
        r = make(zk_connect, subscribe=topic, startingOffsets="earliest")
        start = r.initialOffset()
        for n in range(3):
            produce(b0, topic, 0, encode_message_set(values("b", 1)))
            end = r.latestOffset(start, ReadAllAvailable())
            assert end == {topic: {"0-0": 200 + 40 * (n + 1)}}
            start = end
        assert opened == [(0, first)]  # one connection for the whole query
    # the broker comes back at another port: its old connection is dropped, a new one made
    with EmbeddedBroker(0, port=second, log_dir=log_dir, zk_connect=zk_connect) as b0:
        produce(b0, topic, 0, encode_message_set(values("c", 1)))
        assert r.latestOffset(start, ReadAllAvailable()) == {topic: {"0-0": 360}}
        assert opened == [(0, first), (0, second)]
        assert [c.connected for c in conns] == [False, True]  # the moved one closed
        r.stop()
        assert [c.connected for c in conns] == [False, False]


def test_offsets_of_several_brokers_asked_at_the_same_time(
    brokers: list[EmbeddedBroker], zk_connect: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from kafka_pyspark._wire import OffsetsRequest

    # broker id -> (thread, requests) per call
    asked: dict[int, list[tuple[threading.Thread, int]]] = {}
    real = BrokerConnection.offsets_pipelined

    def spy(self: BrokerConnection, requests: Sequence[OffsetsRequest],
            answers: list[list[int]] | None = None) -> list[list[int]]:
        assert self.broker_id is not None
        asked.setdefault(self.broker_id, []).append((threading.current_thread(), len(requests)))
        return real(self, requests, answers)

    for b in brokers:
        send(b, topic, 0, encode_message_set(values("a", 2)))
    r = make(zk_connect, subscribe=topic, startingOffsets="earliest")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0-0": 80, "0-1": 0, "1-0": 80, "1-1": 0, "1-2": 0}}
    monkeypatch.setattr(BrokerConnection, "offsets_pipelined", spy)
    assert r.latestOffset(end, ReadAllAvailable()) == end
    assert r.latestOffset(end, ReadAllAvailable()) == end
    # one thread per broker, all of a broker's partitions pipelined on it in one call, never
    # the caller's thread; the same threads in every micro-batch, until stop()
    assert [n for _, n in asked[0]] == [2, 2] and [n for _, n in asked[1]] == [3, 3]
    threads = {t for calls in asked.values() for t, _ in calls}
    assert len(threads) == 2 and threading.current_thread() not in threads
    assert all(t.is_alive() for t in threads)
    r.stop()
    assert not any(t.is_alive() for t in threads)
    # maxBytesPerTrigger's boundary scans too: one MULTIFETCH per broker, on its own thread
    scans: dict[int, set[str]] = {}
    real_multifetch = BrokerConnection.multifetch

    def spy_scan(self: BrokerConnection, fetches: Sequence[FetchRequest]) -> list[FetchResponse]:
        assert self.broker_id is not None
        scans.setdefault(self.broker_id, set()).add(threading.current_thread().name)
        return real_multifetch(self, fetches)

    monkeypatch.setattr(BrokerConnection, "multifetch", spy_scan)
    r = make(zk_connect, subscribe=topic, startingOffsets="earliest", maxBytesPerTrigger="50")
    r.prefetch_scans = False
    start = r.initialOffset()
    assert r.latestOffset(start, ReadMaxBytes(50)) == {
        topic: {"0-0": 40, "0-1": 0, "1-0": 0, "1-1": 0, "1-2": 0}
    }
    assert len(scans[0]) == len(scans[1]) == 1
    assert scans[0] != scans[1]
    assert threading.current_thread().name not in scans[0] | scans[1]
    r.stop()


@pytest.mark.zk_needs("multiRead")  # the topology's values in one multiRead
def test_registry_read_per_micro_batch_is_three_rounds_for_any_topic_count(
    brokers: list[EmbeddedBroker], zk_connect: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_pyspark._cluster.zk_session import ZkSession

    for i in range(4):
        for b in brokers:
            send(b, f"{topic}{i}", 0, encode_message_set(values("a", 1)))
    r = make(zk_connect, subscribePattern=f"{topic}.*", startingOffsets="earliest")
    start = r.initialOffset()
    assert sum(len(v) for v in start.values()) == 4 * (2 + 3)
    rounds: list[str] = []
    real = ZkSession._pipeline

    def spy(self: ZkSession, what: str, where: str, requests: Any, expected: Any) -> Any:
        rounds.append(f"{what} {len(requests)}")
        return real(self, what, where, requests, expected)

    monkeypatch.setattr(ZkSession, "_pipeline", spy)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {f"{topic}{i}": {"0-0": 40, "0-1": 0, "1-0": 40, "1-1": 0, "1-2": 0}
                   for i in range(4)}
    # the topics; the brokers' and each topic's nodes; their values
    assert rounds == ["listing 1", "listing 5", "reading 1"]  # 10 values: one multiRead (3.6+)
    # planning the micro-batch uses the brokers that view found: no second registry read
    rounds.clear()
    assert len(r.partitions(start, end)) == 2  # one per broker
    assert rounds == []
    # a query restarted from a checkpoint plans its last micro-batch first: from the registry
    again = make(zk_connect, subscribePattern=f"{topic}.*", startingOffsets="earliest")
    assert len(again.partitions(start, end)) == 2
    assert rounds == ["listing 1", "reading 1"]
    again.stop()
    r.stop()


def test_available_now_target(broker: EmbeddedBroker, zk_connect: str, topic: str) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    r = make(zk_connect, subscribe=topic, startingOffsets="earliest", maxBytesPerTrigger="150")
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    target = broker.log_end(topic, 0)
    send(broker, topic, 0, encode_message_set(values("late", 10)))
    ends = []
    for _ in range(20):
        end = r.latestOffset(start, ReadMaxBytes(150))
        if end == start:
            break
        ends.append(end[topic]["0-0"])
        start = end
    assert ends[-1] == target
    assert all(e <= target for e in ends)
    # ReadAllAvailable (what Spark asks for after a limit-less trigger) honours the target too
    assert r.latestOffset(start, ReadAllAvailable()) == start


def test_vanished_broker_keeps_offsets_new_ones_start_at_earliest(
    tmp_path: Path, zk_connect: str, topic: str
) -> None:
    with EmbeddedBroker(0, log_dir=tmp_path / "b0", zk_connect=zk_connect, num_partitions=1) as b0:
        send(b0, topic, 0, encode_message_set(values("a", 5)))
        r = make(zk_connect, subscribePattern=f"{topic}.*", startingOffsets="latest")
        start = r.initialOffset()
        assert start == {topic: {"0-0": 200}}
        send(b0, topic, 0, encode_message_set(values("b", 5)))
        b0.stop()
        # gone from the registry: its offset is kept, nothing to read
        assert r.latestOffset(start, ReadAllAvailable()) == start
        with EmbeddedBroker(
            1, log_dir=tmp_path / "b1", zk_connect=zk_connect, num_partitions=2
        ) as b1:
            send(b1, topic, 1, encode_message_set(values("c", 2)))
            send(b1, f"{topic}x", 0, encode_message_set(values("d", 3)))
            # new broker-partitions and a new matching topic enter at their earliest offset
            mid = r.latestOffset(start, ReadAllAvailable())
            assert mid == {
                topic: {"0-0": 200, "1-0": 0, "1-1": 0},
                f"{topic}x": {"1-0": 0, "1-1": 0},
            }
            assert read_all(r, start, mid).num_rows == 0
            b0.start()
            b0.wait_for_topic(topic)
            end = r.latestOffset(mid, ReadAllAvailable())
            assert end == {
                topic: {"0-0": 400, "1-0": 0, "1-1": 80},
                f"{topic}x": {"1-0": 120, "1-1": 0},
            }
            got = sorted(read_all(r, mid, end).column("value").to_pylist())
            assert got == sorted(values("b", 5) + values("c", 2) + values("d", 3))
            r.stop()


def test_data_loss_log_recreated(tmp_path: Path, zk_connect: str, topic: str) -> None:
    import shutil

    with EmbeddedBroker(0, log_dir=tmp_path / "b0", zk_connect=zk_connect) as b0:
        send(b0, topic, 0, encode_message_set(values("a", 10)))
        strict = make(zk_connect, subscribe=topic, startingOffsets="latest")
        lenient = make(
            zk_connect, subscribe=topic, startingOffsets="latest", failOnDataLoss="false"
        )
        start = strict.initialOffset()
        assert lenient.initialOffset() == start == {topic: {"0-0": 400}}
        b0.stop()
        shutil.rmtree(tmp_path / "b0")
        b0.start()
        send(b0, topic, 0, encode_message_set(values("new", 2)))
        with pytest.raises(DataLossError, match=r"past the log end 80.*failOnDataLoss"):
            strict.latestOffset(start, ReadAllAvailable())
        reset = lenient.latestOffset(start, ReadAllAvailable())
        assert reset == {topic: {"0-0": 0}}  # back to the earliest of the new log
        assert lenient.partitions(start, reset) == []
        end = lenient.latestOffset(reset, ReadAllAvailable())
        assert read_all(lenient, reset, end).column("value").to_pylist() == values("new", 2)


def test_commit_to_group_writes_0_7_nodes(
    broker: EmbeddedBroker, zk_connect: str, topic: str, kz: Any
) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 3)))
    r = make(zk_connect, subscribe=topic, commitToGroup="true", **{"group.id": "grp"})
    r.commit({topic: {"0-0": 120, "0-1": 0}})
    assert kz.get(f"/consumers/grp/offsets/{topic}/0-0")[0] == b"120"
    assert kz.get(f"/consumers/grp/offsets/{topic}/0-1")[0] == b"0"
    r.commit({topic: {"0-0": 80, "0-1": 0}})  # overwritten, even backwards (a reset)
    assert kz.get(f"/consumers/grp/offsets/{topic}/0-0")[0] == b"80"
    with pytest.raises(OffsetFormatError):
        r.commit({topic: {"0-0": -1}})
    # without commitToGroup nothing is written
    other = make(zk_connect, subscribe=topic, **{"group.id": "quiet"})
    other.commit({topic: {"0-0": 120}})
    assert kz.exists("/consumers/quiet") is None
    r.stop()


def test_partitions_is_a_pure_function_of_the_offsets(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 20)))
    r = make(zk_connect, subscribe=topic, startingOffsets="earliest")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadMaxBytes(400))
    # a fresh reader (a restarted query) plans the same ranges from the same two offsets
    fresh = make(zk_connect, subscribe=topic)
    a = r.partitions(start, end)
    b = fresh.partitions(start, end)
    assert [p.ranges for p in kafka_partitions(a)] == [p.ranges for p in kafka_partitions(b)]
    assert read_all(fresh, start, end).num_rows == 10


def test_starting_timestamp(broker: EmbeddedBroker, zk_connect: str, topic: str) -> None:
    import time

    send(broker, topic, 0, encode_message_set(values("a", 4)))
    # 0.7 knows time per segment only: nothing is older than epoch 0 -> the earliest offset;
    # everything is older than a minute from now -> the log end
    old = make(zk_connect, subscribe=topic, startingTimestamp="0")
    assert old.initialOffset() == {topic: {"0-0": 0, "0-1": 0}}
    future = str(int(time.time() * 1000) + 60_000)
    new = make(zk_connect, subscribe=topic, startingTimestamp=future)
    assert new.initialOffset() == {topic: {"0-0": 160, "0-1": 0}}


def test_broker_list_mode_and_unreachable_broker(broker: EmbeddedBroker, topic: str) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 4)))
    r = Kafka07StreamReader(
        {"broker.list": broker.broker_list_entry, "subscribe": topic,
         "startingOffsets": "earliest", "socket.timeout.ms": "2000"},
        READ_SCHEMA,
    )
    start = r.initialOffset()
    assert start == {topic: {"0-0": 0, "0-1": 0}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0-0": 160, "0-1": 0}}
    broker.stop()
    try:
        # not answering: offsets kept (a warning), no error, nothing to read
        assert r.latestOffset(end, ReadAllAvailable()) == end
    finally:
        broker.start()
    send(broker, topic, 1, encode_message_set(values("b", 2)))
    later = r.latestOffset(end, ReadAllAvailable())
    assert later == {topic: {"0-0": 160, "0-1": 80}}
    assert read_all(r, end, later).column("value").to_pylist() == values("b", 2)
    r.stop()


def test_offset_inside_a_message_is_a_clear_error(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    from kafka_pyspark.errors import MessageError

    send(broker, topic, 0, encode_message_set(values("a", 10)))
    spec = f'{{"{topic}": {{"0-0": 5}}}}'
    r = make(zk_connect, subscribe=topic, startingOffsets=spec, maxBytesPerTrigger="100")
    start = r.initialOffset()
    with pytest.raises(MessageError, match=r"partition 0.*(message boundary|offset 5)"):
        r.latestOffset(start, ReadMaxBytes(100))
