"""``kafka07 topics`` and ``offsets``, and the rows of ``lag``: tables from the registry and
OFFSETS requests (``lag``'s command and its totals are :mod:`kafka_pyspark.cli._lag`).

The table builders (:func:`topic_overview`, :func:`partition_offsets`, :func:`group_lag`) are
library functions returning rows, used by the commands and by the notebooks. Every broker is
asked in parallel under its own deadline: a hung or unreachable broker becomes an error row,
the rest of the table is still filled.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._shared.partition_key import parse_partition_key, partition_key
from kafka_pyspark.cli._common import (
    DEFAULT_TIMEOUT_MS,
    EXIT_DATA,
    EXIT_OK,
    BrokerFailure,
    CliError,
    add_cluster_args,
    by_broker,
    live_brokers,
    open_cluster,
    per_broker,
    topic_partitions,
    worst,
)
from kafka_pyspark.cli._output import json_document, table

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kafka_pyspark._cluster import BrokerAddress, Cluster, Registry
    from kafka_pyspark.client import BrokerConnection

# lag statuses (the same words in the text table and in --json)
OK = "ok"
NOT_COMMITTED = "not-committed"
PAST_END = "past-log-end"
BEFORE_START = "before-log-start"
NOT_LIVE = "broker-not-live"
NOT_REGISTERED = "partition-not-registered"
BAD_NODE = "bad-offset-node"
ERROR = "error"
#: statuses that make ``lag`` exit 1: the group would fail (or lose data) on its next fetch,
#: or its committed offset node is not in 0.7's format
DATA_PROBLEMS = frozenset({PAST_END, BEFORE_START, BAD_NODE})


# --- topics --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicRow:
    topic: str
    #: broker id -> partition count, as registered (``/brokers/topics/[topic]/[id]``)
    partitions: dict[int, int]
    #: broker ids above that are not live (no ``/brokers/ids/[id]``): not readable now
    not_live: tuple[int, ...]

    @property
    def live_partitions(self) -> int:
        return sum(n for b, n in self.partitions.items() if b not in self.not_live)


def topic_overview(cluster: Cluster) -> tuple[dict[int, str], list[TopicRow]]:
    """Live brokers (id -> host:port) and every registered topic's partitions per broker."""
    registry = cluster.registry()
    if registry is None:
        raise CliError("topics needs --zk: broker.list names brokers, not topics")
    brokers = live_brokers(cluster)
    rows = []
    for topic in cluster.topics():
        counts = registry.topic_partitions(topic)
        gone = tuple(b for b in counts if b not in brokers)
        rows.append(TopicRow(topic, counts, gone))
    return {b: f"{a.host}:{a.port}" for b, a in brokers.items()}, rows


def cmd_topics(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        brokers, rows = topic_overview(cluster)
    if args.json:
        json_document({
            "brokers": [{"id": b, "address": a} for b, a in brokers.items()],
            "topics": [
                {
                    "topic": r.topic,
                    "partitions": {str(b): n for b, n in r.partitions.items()},
                    "not_live": list(r.not_live),
                    "live_partitions": r.live_partitions,
                }
                for r in rows
            ],
        })
        return EXIT_OK
    table(["broker", "address"], [[b, a] for b, a in brokers.items()])
    print()
    table(
        ["topic", "partitions", "per broker (id:count)"],
        [
            [r.topic, r.live_partitions, " ".join(
                f"{b}:{n}" + (" (not live)" if b in r.not_live else "")
                for b, n in r.partitions.items()
            )]
            for r in rows
        ],
    )
    return EXIT_OK


# --- offsets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetsRow:
    broker: int
    partition: int | None  # None: the whole broker failed before its partitions were known
    earliest: int | None = None
    latest: int | None = None
    error: str | None = None


def broker_offsets(
    conn: BrokerConnection, topic: str, partitions: list[int] | None
) -> list[tuple[int, int, int]]:
    """``(partition, earliest, latest)`` of each partition, the requests pipelined."""
    from kafka_pyspark.client import probe_partition_count

    if partitions is None:  # broker.list: probe, as the reader does
        partitions = list(range(probe_partition_count(conn, topic)))
    return broker_offsets_of(conn, {topic: partitions})[topic]


def broker_offsets_of(
    conn: BrokerConnection, partitions: Mapping[str, list[int]]
) -> dict[str, list[tuple[int, int, int]]]:
    """:func:`broker_offsets` of several topics ({topic: partitions}), all the requests
    pipelined in one call: one per partition, its segment starts and log end (the oldest
    start is what OFFSETS earliest answers), so a broker answers half as many requests as
    asking earliest and latest apart."""
    from kafka_pyspark.client._offsets import log_bounds_of, segment_starts_request

    asked = [(t, p) for t, ps in partitions.items() for p in ps]
    requests = [segment_starts_request(t, p) for t, p in asked]
    got = iter([log_bounds_of(answer, conn.address, t, p)
                for (t, p), answer in zip(asked, conn.offsets_pipelined(requests), strict=True)])
    return {t: [(p, *next(got)) for p in ps] for t, ps in partitions.items()}


def offsets_requests(partitions: Mapping[int, list[int]]) -> dict[int, int]:
    """OFFSETS requests per broker of :func:`broker_offsets` (for its deadline)."""
    return {b: len(ps) for b, ps in partitions.items()}


def partition_offsets(cluster: Cluster, topic: str, timeout_ms: int) -> list[OffsetsRow]:
    """Earliest and latest offset of every broker-partition of ``topic``."""
    brokers = live_brokers(cluster)
    known: dict[int, list[int]] | None = None
    if cluster.registry() is not None:
        known = by_broker(topic_partitions(cluster, topic))
        brokers = {b: a for b, a in brokers.items() if b in known}
    answers = per_broker(
        brokers,
        lambda conn, b: broker_offsets(conn, topic, None if known is None else known[b]),
        timeout_ms,
        None if known is None else offsets_requests(known),
    )
    rows: list[OffsetsRow] = []
    for b, got in sorted(answers.items()):
        if isinstance(got, BrokerFailure):
            parts: list[int | None] = list(known[b]) if known is not None else [None]
            rows.extend(OffsetsRow(b, p, error=str(got)) for p in parts)
        else:
            rows.extend(OffsetsRow(b, p, lo, hi) for p, lo, hi in got)
    return rows


def cmd_offsets(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        rows = partition_offsets(cluster, args.topic, args.timeout_ms)
    code = worst([2 if r.error else 0 for r in rows])
    if args.json:
        json_document({"topic": args.topic, "partitions": [asdict(r) for r in rows]})
        return code
    out: list[list[object]] = []
    for r in rows:
        name = f"{r.broker}-{'?' if r.partition is None else r.partition}"
        if r.error is not None:
            out.append([name, "-", "-", "-", f"error: {r.error}"])
        else:
            assert r.earliest is not None and r.latest is not None
            out.append([name, r.earliest, r.latest, r.latest - r.earliest, ""])
    table(["broker-partition", "earliest", "latest", "bytes", "status"], out)
    return code


# --- lag -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LagRow:
    """One broker-partition of a group's topic, like a line of 0.7's ConsumerOffsetChecker."""

    group: str
    topic: str
    broker: int | None  # None only for an offset node whose name is not [bid]-[pid]
    partition: int | None
    offset: int | None  # committed; None if never committed (or not readable)
    earliest: int | None
    latest: int | None
    lag: int | None  # latest - offset; None when it cannot be a meaningful number
    status: str
    error: str | None = None
    #: the consumer thread owning it now (``/consumers/[group]/owners/[topic]/[bid]-[pid]``)
    owner: str | None = None
    #: the ZooKeeper node name (``[bid]-[pid]``, or whatever a malformed node is called)
    node: str = ""


def _classify(offset: int | None, lo: int, hi: int) -> tuple[int | None, str]:
    if offset is None:
        return None, NOT_COMMITTED
    if offset > hi:
        return None, PAST_END
    if offset < lo:
        return hi - offset, BEFORE_START
    return hi - offset, OK


def malformed_by_key(malformed: Mapping[str, str]) -> dict[tuple[int, int], str]:
    """The errors of malformed offset nodes (:meth:`~kafka_pyspark._cluster.registry.Registry.
    group_offsets_checked`) by broker-partition, for those named ``[bid]-[pid]``."""
    return {k: e for k, e in ((parse_partition_key(n), e) for n, e in malformed.items()) if k}


@dataclass(frozen=True)
class _GroupView:
    """What ``lag`` reads from ZooKeeper about a group's topics, all topics at once."""

    committed: dict[str, tuple[dict[tuple[int, int], int], dict[str, str]]]
    owners: dict[str, dict[tuple[int, int], str]]
    brokers: dict[int, BrokerAddress]
    counts: dict[str, dict[int, int]]

    def keys(self, topic: str) -> set[tuple[int, int]]:
        """The rows of ``topic``: committed (or malformed) and live broker-partitions."""
        return set(self.committed[topic][0]) | set(self.bad(topic)) | {
            (b, p) for b, n in self.counts[topic].items() if b in self.brokers for p in range(n)}

    def bad(self, topic: str) -> dict[tuple[int, int], str]:
        """The error of each malformed offset node of ``topic`` named ``[bid]-[pid]``."""
        return malformed_by_key(self.committed[topic][1])

    def askable(self, topic: str) -> list[tuple[int, int]]:
        counts = self.counts[topic]
        return [k for k in self.keys(topic)
                if k[0] in self.brokers and k[1] < counts.get(k[0], 0)]


def _group_view(registry: Registry, group: str, topics: list[str]) -> _GroupView:
    """:class:`_GroupView` in a fixed number of pipelined ZooKeeper rounds, whatever the
    number of topics."""
    live, counts = registry.topology(topics)
    return _GroupView(registry.group_offsets_of(group, topics),
                      registry.group_owners_of(group, topics),
                      {b: info.address for b, info in live.items()}, counts)


def _bounds(view: _GroupView, topics: list[str], timeout_ms: int
            ) -> dict[tuple[str, int, int], tuple[int, int] | BrokerFailure]:
    """Earliest and latest offset of every askable broker-partition of ``topics``: one
    pipelined call per broker, all brokers at once."""
    asked: dict[int, dict[str, list[int]]] = {}
    for topic in topics:
        for b, ps in by_broker(view.askable(topic)).items():
            asked.setdefault(b, {})[topic] = ps
    answers = per_broker(
        {b: view.brokers[b] for b in asked},
        lambda conn, b: broker_offsets_of(conn, asked[b]),
        timeout_ms,
        offsets_requests({b: [p for ps in by_topic.values() for p in ps]
                          for b, by_topic in asked.items()}),
    )
    bounds: dict[tuple[str, int, int], tuple[int, int] | BrokerFailure] = {}
    for b, got in answers.items():
        for topic, ps in asked[b].items():
            if isinstance(got, BrokerFailure):
                bounds.update({(topic, b, p): got for p in ps})
            else:
                bounds.update({(topic, b, p): (lo, hi) for p, lo, hi in got[topic]})
    return bounds


def _topic_lag(view: _GroupView, group: str, topic: str,
               bounds: Mapping[tuple[str, int, int], tuple[int, int] | BrokerFailure]
               ) -> list[LagRow]:
    committed, malformed = view.committed[topic]
    bad = view.bad(topic)
    owners = view.owners[topic]
    rows = [_lag_row(group, topic, key, committed.get(key), bounds.get((topic, *key)),
                     key[0] in view.brokers, bad.get(key), owners.get(key))
            for key in sorted(view.keys(topic))]
    rows.extend(LagRow(group, topic, None, None, None, None, None, None, BAD_NODE, e, node=n)
                for n, e in sorted(malformed.items()) if parse_partition_key(n) is None)
    return rows


def _lag_row(group: str, topic: str, key: tuple[int, int], offset: int | None,
             found: tuple[int, int] | BrokerFailure | None, live: bool, bad: str | None,
             owner: str | None) -> LagRow:
    earliest, latest = found if isinstance(found, tuple) else (None, None)
    lag: int | None = None
    error: str | None = None
    if bad is not None:
        status, error = BAD_NODE, bad
    elif found is None:
        status = NOT_LIVE if not live else NOT_REGISTERED
    elif isinstance(found, BrokerFailure):
        status, error = ERROR, str(found)
    else:
        lag, status = _classify(offset, *found)
    return LagRow(group, topic, *key, offset, earliest, latest, lag, status, error, owner=owner,
                  node=partition_key(*key))


def group_lag(
    cluster: Cluster, group: str, topics: list[str] | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> list[LagRow]:
    """Every committed broker-partition of ``group`` (live or not) and every live partition
    of its topics (all topics it committed when ``topics`` is None), with lag and status."""
    registry = cluster.registry()
    if registry is None:
        raise CliError("lag needs --zk: group offsets live in ZooKeeper")
    if not topics:
        topics = registry.group_topics(group)
        if not topics:
            if not cluster.brokers():
                live_brokers(cluster)  # raises the chroot hint
            raise CliError(f"group {group!r} has no committed offsets", EXIT_DATA)
    view = _group_view(registry, group, topics)
    bounds = _bounds(view, topics, timeout_ms)
    rows: list[LagRow] = []
    for topic in topics:
        part = _topic_lag(view, group, topic, bounds)
        if not part:
            if not cluster.brokers():
                live_brokers(cluster)
            raise CliError(
                f"topic {topic!r} is not registered in ZooKeeper and group {group!r} "
                "committed nothing for it",
                EXIT_DATA,
            )
        rows.extend(part)
    return rows


def lag_exit_code(rows: list[LagRow]) -> int:
    return worst([
        2 if r.status == ERROR else EXIT_DATA if r.status in DATA_PROBLEMS else EXIT_OK
        for r in rows
    ])


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("topics", help="brokers and topics (partitions per broker) from ZooKeeper")
    add_cluster_args(p, broker_list=False)
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("offsets", help="earliest/latest offset per broker-partition")
    add_cluster_args(p)
    p.add_argument("--topic", required=True, help="the topic whose partitions to show")
    p.set_defaults(func=cmd_offsets)
