"""The registry is read in a fixed number of ZooKeeper round trips whatever the number of
topics: a batch read's planning and a stream's first and later micro-batches, for
``subscribe``, ``subscribePattern``, ``assign`` and ``startingOffsets=group``. A round trip is
one pipelined call of the session (``ZkSession._pipeline``): its requests go out together."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from kafka_pyspark._cluster import Registry
from kafka_pyspark._cluster.zk_session import ZkSession
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._options import parse_read_options
from kafka_pyspark._spark.compat import ReadAllAvailable
from kafka_pyspark._spark.read.batch import plan_batch
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark._spark.stream.reader import Kafka07StreamReader
from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.errors import RegistryPermissionError
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk
# the server's own multi (3.4+) / multiRead (3.6+): the one-per-node cases run on any server
NEEDS_MULTI = pytest.mark.zk_needs("multi")
NEEDS_MULTI_READ = pytest.mark.zk_needs("multiRead")

TOPICS = [f"r-{i:02d}" for i in range(50)]
SIZE = len(encode_message_set([b"value"]))


@pytest.fixture
def cluster(brokers: list[EmbeddedBroker], zk_connect: str) -> str:
    """Every topic of ``TOPICS`` on both brokers, one message in partition 0 of each; group
    ``g`` committed offset 0 of every partition."""
    for b in brokers:
        with BrokerConnection(b.host, b.port, timeout=10.0) as conn:
            for topic in TOPICS:
                conn.produce(topic, 0, encode_message_set([b"value"]))
            conn.barrier(TOPICS[-1], 0)
        for topic in TOPICS:
            b.wait_for_topic(topic)
    with Registry(zk_connect) as registry:
        registry.commit_group_offsets_of(
            "g", {t: {(b.broker_id, p): 0 for b in brokers for p in range(b.num_partitions)}
                  for t in TOPICS}, creator="test")
    return zk_connect


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What each ZooKeeper round trip did (``"listing"``, ``"reading"``, ...), in order."""
    seen: list[str] = []
    real = ZkSession._pipeline

    def spy(self: ZkSession, what: str, where: str, requests: Any, expected: Any) -> Any:
        seen.append(what)
        return real(self, what, where, requests, expected)

    monkeypatch.setattr(ZkSession, "_pipeline", spy)
    yield seen


def subscriptions(topics: list[str]) -> dict[str, dict[str, str]]:
    """Each way to name ``topics``."""
    return {
        "subscribe": {"subscribe": ",".join(topics)},
        "subscribePattern": {"subscribePattern": "|".join(topics)},
        "assign": {"assign": json.dumps({t: ["0-0", "1-0"] for t in topics})},
        "group": {"subscribe": ",".join(topics), "startingOffsets": "group", "group.id": "g"},
    }


def counted(rounds: list[str], fn: Callable[[], object]) -> tuple[list[str], object]:
    rounds.clear()
    result = fn()
    return list(rounds), result


def test_batch_planning_rounds_do_not_grow_with_topics(cluster: str, rounds: list[str]) -> None:
    one, many = subscriptions(TOPICS[:1]), subscriptions(TOPICS)
    for mode in one:
        runs = []
        for options in (one[mode], many[mode]):
            opts = parse_read_options({"zk.connect": cluster, **options}, "batch")
            runs.append(counted(rounds, partial(plan_batch, opts)))
        (few, planned_one), (lots, planned_many) = runs
        assert isinstance(planned_one, list) and isinstance(planned_many, list)
        ranges = [r for part in planned_many for r in part.ranges]
        assert len(ranges) == 2 * len(TOPICS), mode  # partition 0 of each broker holds data
        assert few == lots, mode
        assert len(few) <= (5 if mode == "group" else 3), (mode, few)


def test_stream_rounds_do_not_grow_with_topics(cluster: str, rounds: list[str]) -> None:
    one, many = subscriptions(TOPICS[:1]), subscriptions(TOPICS)
    for mode in one:
        seen = []
        for topics, options in ((TOPICS[:1], one[mode]), (TOPICS, many[mode])):
            reader = Kafka07StreamReader({"zk.connect": cluster, **options}, READ_SCHEMA)
            first, start = counted(rounds, reader.initialOffset)
            assert isinstance(start, dict) and sorted(start) == topics, mode
            later, end = counted(rounds, partial(reader.latestOffset, start,
                                                 ReadAllAvailable()))
            assert isinstance(end, dict) and sorted(end) == topics, mode
            reader.stop()
            seen.append((first, later))
        assert seen[0] == seen[1], mode


def test_group_commits_write_what_moved_in_rounds_that_do_not_grow_with_topics(
    cluster: str, rounds: list[str], brokers: list[EmbeddedBroker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``commitToGroup``: the first commit creates every node, in the same rounds for 1 topic
    as for 50; later commits write only the offsets that moved, in one round."""
    written: list[int] = []
    created: list[int] = []
    real_set, real_create = ZkSession.set_values, ZkSession.create

    def spy_set(self: ZkSession, items: Any, where: str) -> list[bool]:
        written.append(len(items))
        return real_set(self, items, where)

    def spy_create(self: ZkSession, nodes: Any, where: str, *, together: Any = ()) -> Any:
        created.append(len(nodes) + len(together))
        return real_create(self, nodes, where, together=together)

    monkeypatch.setattr(ZkSession, "set_values", spy_set)
    monkeypatch.setattr(ZkSession, "create", spy_create)
    first_commits = []
    for n, group in ((1, "c1"), (len(TOPICS), "c50")):
        reader = Kafka07StreamReader(
            {"zk.connect": cluster, "subscribe": ",".join(TOPICS[:n]), "commitToGroup": "true",
             "group.id": group, "startingOffsets": "earliest"}, READ_SCHEMA)
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        written.clear()
        created.clear()
        first, _ = counted(rounds, partial(reader.commit, end))
        first_commits.append(first)
        # listed first: none there yet, so nothing is written before the 2 + 3 partitions of
        # each topic are created, with /consumers, the group, offsets and the topics' nodes
        assert written == [] and created == [3 + n + 5 * n]
        assert first == ["listing", "creating"]
        with Registry(cluster) as registry:
            assert registry.group_offsets_of(group, TOPICS[:n]) == {
                t: ({(0, 0): SIZE, (0, 1): 0, (1, 0): SIZE, (1, 1): 0, (1, 2): 0}, {})
                for t in TOPICS[:n]}
        reader.stop()
    assert first_commits[0] == first_commits[1]
    # two broker-partitions move: the next commit writes those two, in one round
    for b in brokers:
        with BrokerConnection(b.host, b.port, timeout=10.0) as conn:
            conn.produce(TOPICS[7], 1, encode_message_set([b"value"]))
            conn.barrier(TOPICS[7], 1)
    reader = Kafka07StreamReader(
        {"zk.connect": cluster, "subscribe": ",".join(TOPICS), "commitToGroup": "true",
         "group.id": "c50", "startingOffsets": "group"}, READ_SCHEMA)
    start = reader.initialOffset()
    written.clear()
    created.clear()
    reader.commit(start)  # a restarted query's first commit: every offset, all there already
    assert written == [5 * len(TOPICS)] and created == []
    end = reader.latestOffset(start, ReadAllAvailable())
    written.clear()
    later, _ = counted(rounds, partial(reader.commit, end))
    assert written == [2] and later == ["writing"]
    with Registry(cluster) as registry:
        assert registry.group_offsets("c50", TOPICS[7]) == {
            (0, 0): SIZE, (0, 1): SIZE, (1, 0): SIZE, (1, 1): SIZE, (1, 2): 0}
    reader.stop()


MANY = {(b, p): 1000 * b + p for b in range(4) for p in range(600)}  # 2,400 offsets


def without_multi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session as against a 3.3 server, which has no ``multi``."""
    monkeypatch.setattr(ZkSession, "has_multi", lambda self: False)


@pytest.mark.parametrize("multi", [pytest.param(True, marks=NEEDS_MULTI), False],
                         ids=["multi", "one-per-node"])
def test_first_commit_of_many_offsets_takes_two_rounds(
    zk_connect: str, rounds: list[str], requests_sent: list[str], multi: bool,
    monkeypatch: pytest.MonkeyPatch, kz: Any,
) -> None:
    """Listing, then one round creating the parents and every node: with ``multi`` (3.4+)
    a few hundred nodes per request; without it (3.3), one request per node."""
    if not multi:
        without_multi(monkeypatch)
    with Registry(zk_connect) as registry:
        registry.children(["/"])  # connected (and the server asked about multi) before counting
        rounds.clear()
        requests_sent.clear()
        registry.commit_group_offsets_of("g", {"t": MANY, "u": MANY}, creator="me",
                                         listed=True)
        sent = list(requests_sent)
        assert rounds == ["listing", "creating"]
        assert registry.group_offsets_of("g", ["t", "u"]) == {t: (MANY, {}) for t in "tu"}
    # 2 listings; 5 parents (/consumers, g, offsets, t, u); 2,400 nodes per topic
    per_node = ["Transaction"] * 10 if multi else ["Create"] * (2 * len(MANY))
    assert sent == ["GetChildren"] * 2 + ["Create"] * 5 + per_node
    assert kz.get("/consumers/g/offsets/u")[0] == b"me"


@pytest.mark.parametrize("multi", [pytest.param(True, marks=NEEDS_MULTI), False],
                         ids=["multi", "one-per-node"])
def test_rewriting_many_offsets_takes_one_round(
    zk_connect: str, rounds: list[str], requests_sent: list[str], multi: bool,
    monkeypatch: pytest.MonkeyPatch, kz: Any,
) -> None:
    """Every offset moved (or a restarted query's first commit): one round of writes, in
    transactions of a few hundred where the server has them. A node deleted meanwhile fails
    its transaction: those nodes are written one by one and the deleted one created again."""
    if not multi:
        without_multi(monkeypatch)
    moved = {key: offset + 1 for key, offset in MANY.items()}
    with Registry(zk_connect) as registry:
        registry.commit_group_offsets("g", "t", MANY, creator="me")
        rounds.clear()
        requests_sent.clear()
        registry.commit_group_offsets("g", "t", moved, creator="me")
        assert rounds == ["writing"]
        assert requests_sent == (["Transaction"] * 5 if multi else ["SetData"] * len(MANY))
        assert registry.group_offsets("g", "t") == moved
        kz.delete("/consumers/g/offsets/t/3-5")
        rounds.clear()
        registry.commit_group_offsets("g", "t", MANY, creator="me")
        assert rounds == ["writing", *(["writing"] if multi else []), "creating"]
        assert registry.group_offsets("g", "t") == MANY


@pytest.mark.parametrize("multi_read", [pytest.param(True, marks=NEEDS_MULTI_READ), False],
                         ids=["multiRead", "one-per-node"])
def test_reading_many_offsets_takes_a_request_per_few_hundred_nodes(
    zk_connect: str, rounds: list[str], requests_sent: list[str], multi_read: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's offsets: one listing, then one round reading every value, in ``multiRead``
    requests of a few hundred nodes where the server has them (3.6+); one per node without."""
    if not multi_read:
        monkeypatch.setattr(ZkSession, "has_multi_read", lambda self: False)
    with Registry(zk_connect) as registry:
        registry.commit_group_offsets("g", "t", MANY, creator="me")
        rounds.clear()
        requests_sent.clear()
        assert registry.group_offsets_of("g", ["t"]) == {"t": (MANY, {})}
        assert rounds == ["listing", "reading"]
        assert requests_sent == ["GetChildren"] + (
            ["MultiRead"] * 5 if multi_read else ["GetData"] * len(MANY))


@pytest.mark.parametrize("multi_read", [pytest.param(True, marks=NEEDS_MULTI_READ), False],
                         ids=["multiRead", "one-per-node"])
def test_each_value_read_together_gets_its_own_answer(
    zk_connect: str, multi_read: bool, monkeypatch: pytest.MonkeyPatch, kz: Any,
) -> None:
    """Read together, a node without a value answers b"", a missing one None, and one whose
    ACL refuses the session is an error naming that node."""
    from kazoo.security import make_digest_acl

    if not multi_read:
        monkeypatch.setattr(ZkSession, "has_multi_read", lambda self: False)
    kz.create("/v/a", b"17", makepath=True)
    kz.create("/v/empty")
    kz.create("/v/closed", b"5", acl=[make_digest_acl("ops", "secret", all=True)])
    paths = [f"/v/n{i}" for i in range(700)]
    for i, path in enumerate(paths):
        kz.create(path, str(i).encode())
    session = ZkSession(zk_connect, session_timeout_ms=10_000, connection_timeout_ms=10_000)
    try:
        assert session.has_multi_read() is multi_read
        assert session.values(["/v/a", "/v/empty", "/v/gone", *paths], "/v/*") == [
            b"17", b"", None, *(str(i).encode() for i in range(700))]
        with pytest.raises(RegistryPermissionError, match="reading /v/closed: permission "):
            session.values(["/v/a", "/v/closed"], "/v/*")
    finally:
        session.close()


@pytest.mark.parametrize(("srvr", "multi_read"), [
    ("Zookeeper version: 3.5.10-2e41b8bd4d3bbd1d4a4d5a80e0dd3bf78212e76c, built on", False),
    ("Zookeeper version: 3.6.0--b4c89dc7f6083829e18fae6e446907ae0b1f22d7, built on", True),
    ("Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC", True),
    ("srvr is not executed because it is not in the whitelist.\n", False),
    ("", False),
])
def test_multi_read_from_the_srvr_answer(srvr: str, multi_read: bool) -> None:
    from kafka_pyspark._cluster.zk_session import multi_read_supported

    assert multi_read_supported(srvr) is multi_read


@pytest.mark.parametrize("multi", [pytest.param(True, marks=NEEDS_MULTI), False],
                         ids=["multi", "one-per-node"])
def test_a_node_another_committer_created_meanwhile_is_overwritten(
    zk_connect: str, rounds: list[str], multi: bool, monkeypatch: pytest.MonkeyPatch, kz: Any,
) -> None:
    """Another committer creates a node between the listing and the creates: its transaction
    fails as a whole, so its nodes are created one by one, and that node is written."""
    if not multi:
        without_multi(monkeypatch)
    real = ZkSession.children_of

    def listing_then_other_committer(self: ZkSession, paths: Any, where: str) -> Any:
        listed = real(self, paths, where)
        kz.create("/consumers/g/offsets/t/2-17", b"5", makepath=True)
        return listed

    monkeypatch.setattr(ZkSession, "children_of", listing_then_other_committer)
    with Registry(zk_connect) as registry:
        registry.commit_group_offsets_of("g", {"t": MANY}, creator="me", listed=True)
        recreated = ["creating"] if multi else []
        assert rounds == ["listing", "creating", *recreated, "writing"]
        monkeypatch.setattr(ZkSession, "children_of", real)
        assert registry.group_offsets("g", "t") == MANY
    assert kz.get("/consumers/g/offsets/t/2-17")[0] == b"2017"


@NEEDS_MULTI
def test_transactions_of_long_node_names_stay_below_the_request_limit(
    zk_connect: str, rounds: list[str], requests_sent: list[str],
) -> None:
    """Offsets of a group with a 2,500-character id: 500 nodes would make a transaction (or a
    multiRead) over the server's request limit (jute.maxbuffer, 1 MiB), which it answers by
    closing the connection; they go in more, smaller requests, still one round."""
    group = "g" * 2500
    offsets = {(0, p): p for p in range(600)}
    moved = {key: offset + 1 for key, offset in offsets.items()}
    with Registry(zk_connect) as registry:
        registry.commit_group_offsets_of(group, {"t": offsets}, creator="me", listed=True)
        assert registry.group_offsets(group, "t") == offsets
        rounds.clear()
        requests_sent.clear()
        registry.commit_group_offsets(group, "t", moved, creator="me")
        assert rounds == ["writing"]
        assert len(requests_sent) > 600 // 500 + 1
        assert set(requests_sent) == {"Transaction"}
        assert registry.group_offsets(group, "t") == moved


@pytest.mark.parametrize(("srvr", "multi"), [
    ("Zookeeper version: 3.3.6-1366786, built on 07/29/2012 06:22 GMT\nLatency", False),
    ("Zookeeper version: 3.4.14-4c25d480e66aadd371de8bd2fd8da255ac140bcf, built on", True),
    ("Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC", True),
    ("srvr is not executed because it is not in the whitelist.\n", True),
    ("", False),
])
def test_multi_from_the_srvr_answer(srvr: str, multi: bool) -> None:
    from kafka_pyspark._cluster.zk_session import multi_supported

    assert multi_supported(srvr) is multi


def test_lag_rounds_do_not_grow_with_topics(
    cluster: str, rounds: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``kafka07 lag`` reads the group's offsets and owners and the topics' partitions in the
    same ZooKeeper rounds for 1 topic as for 50."""
    from kafka_pyspark.cli import main

    seen = []
    for topics in (TOPICS[:1], TOPICS):
        rounds.clear()
        assert main(["lag", "--zk", cluster, "--group", "g", "--topic", ",".join(topics),
                     "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["partitions"]
        assert [(r["topic"], r["node"], r["offset"], r["latest"], r["status"]) for r in rows] == [
            (t, f"{b}-{p}", 0, SIZE if p == 0 else 0, "ok")
            for t in topics for b, n in ((0, 2), (1, 3)) for p in range(n)]
        seen.append(list(rounds))
    assert seen[0] == seen[1]
    assert len(seen[0]) <= 7, seen[0]
