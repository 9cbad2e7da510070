"""How far a 0.7 consumer group is behind: one row per broker-partition, like a line of 0.7's
``ConsumerOffsetChecker`` (``kafka07 lag`` renders them; :func:`kafka_pyspark.group_lag`
returns them as dicts), and the totals per topic and for the group.

However many topics, ZooKeeper is read in the same few rounds of pipelined requests
(:func:`_group_view`) and each broker gets one pipelined call for the offsets of all its
partitions of all the topics (:func:`_bounds`, over :func:`~kafka_pyspark._admin.offsets.ask_each`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._admin.offsets import (
    ask_each,
    broker_offsets_of,
    by_broker,
    live_brokers,
    offsets_requests,
)
from kafka_pyspark._shared.partition_key import parse_partition_key, partition_key
from kafka_pyspark.errors import KafkaError, OptionError, RegistryError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster, Registry

__all__ = [
    "ALL_TOPICS", "BAD_NODE", "BEFORE_START", "DATA_PROBLEMS", "ERROR", "NOT_COMMITTED",
    "NOT_LIVE", "NOT_REGISTERED", "OK", "PAST_END", "LagRow", "LagTotal", "NothingCommittedError",
    "group_lag", "lag_totals", "malformed_by_key",
]

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

class NothingCommittedError(RegistryError):
    """The group committed no offsets (for a topic named that is not registered either)."""


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


Found = tuple[int, int] | KafkaError  # a log's (earliest, latest), or why it is not known


def _bounds(view: _GroupView, topics: list[str], timeout_ms: int
            ) -> dict[tuple[str, int, int], Found]:
    """Earliest and latest offset of every askable broker-partition of ``topics``: one
    pipelined call per broker, all brokers at once."""
    asked: dict[int, dict[str, list[int]]] = {}
    for topic in topics:
        for b, ps in by_broker(view.askable(topic)).items():
            asked.setdefault(b, {})[topic] = ps
    answers, failed = ask_each(
        {b: view.brokers[b] for b in asked},
        lambda conn, b: broker_offsets_of(conn, asked[b]),
        timeout_ms,
        offsets_requests({b: [p for ps in by_topic.values() for p in ps]
                          for b, by_topic in asked.items()}),
    )
    bounds: dict[tuple[str, int, int], Found] = {}
    for b, by_topic in asked.items():
        for topic, ps in by_topic.items():
            if b in failed:
                bounds.update({(topic, b, p): failed[b] for p in ps})
            else:
                bounds.update({(topic, b, p): (lo, hi) for p, lo, hi in answers[b][topic]})
    return bounds


def _topic_lag(view: _GroupView, group: str, topic: str,
               bounds: Mapping[tuple[str, int, int], Found]
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
             found: Found | None, live: bool, bad: str | None,
             owner: str | None) -> LagRow:
    earliest, latest = found if isinstance(found, tuple) else (None, None)
    lag: int | None = None
    error: str | None = None
    if bad is not None:
        status, error = BAD_NODE, bad
    elif found is None:
        status = NOT_LIVE if not live else NOT_REGISTERED
    elif isinstance(found, KafkaError):
        status, error = ERROR, str(found)
    else:
        lag, status = _classify(offset, *found)
    return LagRow(group, topic, *key, offset, earliest, latest, lag, status, error, owner=owner,
                  node=partition_key(*key))


def group_lag(
    cluster: Cluster, group: str, topics: list[str] | None, timeout_ms: int
) -> list[LagRow]:
    """Every committed broker-partition of ``group`` (live or not) and every live partition
    of its topics (all topics it committed when ``topics`` is None), with lag and status;
    each broker's requests within ``timeout_ms`` each (its whole part:
    :func:`~kafka_pyspark.client._brokers.answer_deadline_ms`).

    Raises :class:`NothingCommittedError` when the group committed nothing and no topic is
    named, or a named topic is neither registered nor committed;
    :class:`~kafka_pyspark.errors.NoBrokersRegisteredError` then when no broker is
    registered (a chroot hint)."""
    registry = cluster.registry()
    if registry is None:
        raise OptionError("zk.connect", "lag needs it: group offsets live in ZooKeeper")
    if not topics:
        topics = registry.group_topics(group)
        if not topics:
            if not cluster.brokers():
                live_brokers(cluster)  # raises the chroot hint
            raise NothingCommittedError(f"group {group!r} has no committed offsets")
    view = _group_view(registry, group, topics)
    bounds = _bounds(view, topics, timeout_ms)
    rows: list[LagRow] = []
    for topic in topics:
        part = _topic_lag(view, group, topic, bounds)
        if not part:
            if not cluster.brokers():
                live_brokers(cluster)
            raise NothingCommittedError(
                f"topic {topic!r} is not registered in ZooKeeper and group {group!r} "
                "committed nothing for it"
            )
        rows.extend(part)
    return rows


#: the topic column of the group's total line
ALL_TOPICS = "(all)"


@dataclass(frozen=True)
class LagTotal:
    """The sum over one topic's rows (or all of them): ``lag`` adds up the rows with a lag;
    the partitions the group never committed have none (where it starts there is its
    ``autooffset.reset``), so they are counted apart, with the bytes their logs hold."""

    topic: str
    lag: int
    partitions: int
    owned: int
    #: rows that make the command exit non-zero (a data problem or a broker error)
    problems: int
    #: rows whose status is ``not-committed``, and the bytes their logs hold (latest -
    #: earliest: what the group reads there if it starts from the earliest offset)
    not_committed: int = 0
    not_committed_bytes: int = 0


def lag_totals(rows: list[LagRow]) -> list[LagTotal]:
    """One total per topic (in order of appearance), then one for the whole group."""
    by_topic: dict[str, list[LagRow]] = {}
    for r in rows:  # one pass: a group may read hundreds of topics
        by_topic.setdefault(r.topic, []).append(r)

    def total(name: str, part: list[LagRow]) -> LagTotal:
        fresh = [r for r in part if r.status == NOT_COMMITTED]
        return LagTotal(
            name, sum(r.lag or 0 for r in part), len(part),
            sum(r.owner is not None for r in part),
            sum(r.status == ERROR or r.status in DATA_PROBLEMS for r in part),
            len(fresh), sum((r.latest or 0) - (r.earliest or 0) for r in fresh),
        )

    return [total(t, part) for t, part in by_topic.items()] + [total(ALL_TOPICS, rows)]
