"""Kafka 0.7's ZooKeeper registry, read (and group offsets written) with kazoo.

Nodes, as Kafka 0.7.2 writes them (docs/dev/PROTOCOL.md "ZooKeeper")::

    /brokers/ids/[brokerId]          -> "creator:host:port"       ephemeral, written by a broker
                                        creator is "<host>-<epoch ms>", e.g.
                                        "127.0.0.1-1795304894516:127.0.0.1:9092"
    /brokers/topics/[topic]/[brokerId] -> "2"                     ephemeral, written by a broker:
                                        that broker's partition count for the topic, decimal;
                                        created on the topic's first produce
    /consumers/[group]/ids/[consumerId]                  ephemeral, JSON { "topic": n }
    /consumers/[group]/owners/[topic]/[brokerId]-[partition]   ephemeral, consumer thread id
    /consumers/[group]/offsets/[topic]/[brokerId]-[partition]  persistent

Consumer offsets (``/consumers/[group]/offsets/...``) are what 0.7's
``ZookeeperConsumerConnector`` commits and reads back on start, and what
``kafka.tools.ConsumerOffsetChecker`` reports: the node name is ``[brokerId]-[partition]``
(e.g. ``0-1``), the value is the **decimal ASCII string of the next byte offset to fetch**
(e.g. ``b"1234"``, no padding, no newline): docs/dev/PROTOCOL.md "Consumer groups and their
offsets". This module reads and writes exactly that format, so a group's progress is shared with
0.7's own tools both ways. Parents created by :meth:`Registry.commit_group_offsets` hold the
committer's id as their value (docs/dev/PROTOCOL.md "Intermediate nodes").

Every node value is parsed strictly; a value not in 0.7's format is a :class:`RegistryError`
naming the node and the ZooKeeper address rather than a guess. A ``zk.connect`` string may carry
a chroot (``host:port,host:port/chroot``); all paths are then relative to it.

Time bounds: the session is opened lazily on first use and must connect within
``connection_timeout_ms``; every later call (including retries after a lost connection or an
expired session: the registry holds no ephemeral nodes, so a new session is as good as the old
one) fails once ZooKeeper has answered none of its requests for
``max(session_timeout_ms, connection_timeout_ms)`` (a call of many pipelined requests takes as
long as ZooKeeper needs to answer them, each within that time of the one before). Not reaching
ZooKeeper in time is a :class:`RegistryUnavailableError` (transient); a node whose ACL refuses
the session is a :class:`RegistryPermissionError` naming the node. The session, the bounded
calls and the translation of kazoo's exceptions are :mod:`kafka_pyspark._cluster.zk_session`.

Access control: ``auth=("digest", "user:password")`` (options ``zk.auth.user`` +
``zk.auth.password``, parsed by :mod:`kafka_pyspark._cluster.zk_auth`) adds those digest credentials
to the session, as zkCli's ``addauth digest user:password`` does, so nodes whose ACL grants that
identity can be read and written. The credentials are never logged and never
appear in errors or reprs. Nodes the registry creates (group offset nodes and their parents)
get ZooKeeper's default open ACL unless ``auth`` is given; then they get the ACL of their
nearest existing ancestor, so a group locked down by its operator stays locked down.
kazoo's own log lines go to :data:`kafka_pyspark._cluster.zk_auth.KAZOO_LOG` with
credentials removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from kafka_pyspark._cluster.groups import ConsumerGroups
from kafka_pyspark._cluster.nodes import BROKER_IDS, BROKER_TOPICS, CONSUMERS, RegistryNodes
from kafka_pyspark._cluster.options import (
    BrokerAddress,
    ClusterOptions,
    cluster_options,
    host_problem,
    port_number,
)
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.closing import Closing
from kafka_pyspark._shared.partition_key import is_decimal
from kafka_pyspark._wire.topics import validate_topic_name

__all__ = ["BROKER_IDS", "BROKER_TOPICS", "CONSUMERS", "BrokerInfo", "Registry"]

_T = TypeVar("_T")


def _by_id(names: Sequence[str], paths: Sequence[str], values: Sequence[bytes | None],
           parse: Callable[[int, str, bytes], _T]) -> dict[int, _T]:
    """``{id: parse(id, path, value)}`` of the id nodes ``names`` (checked decimal) at ``paths``,
    sorted by id; a node that vanished since it was listed (value None) is left out."""
    out = {int(name): parse(int(name), path, raw)
           for name, path, raw in zip(names, paths, values, strict=True) if raw is not None}
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class BrokerInfo:
    """One ``/brokers/ids/[id]`` node: ``creator:host:port``."""

    id: int
    host: str
    port: int
    creator: str

    @property
    def address(self) -> BrokerAddress:
        return BrokerAddress(self.id, self.host, self.port)


class Registry(Closing):
    """Kafka 0.7's ZooKeeper registry. Context manager; thread-safe; all calls time-bounded.

    Brokers and topics are read here; consumer groups by its :class:`ConsumerGroups`
    (``groups.py``), whose methods it offers under the same names; both read through the one
    :class:`RegistryNodes` (``nodes.py``: the session and node values).

    Raises :class:`OptionError` (``zk.connect``) for a malformed connect string and
    :class:`RegistryError` (naming the path and the ZooKeeper address) for anything that goes
    wrong talking to ZooKeeper or reading its nodes.
    """

    def __init__(
        self,
        zk_connect: str,
        *,
        session_timeout_ms: int = defaults.ZK_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int = defaults.ZK_CONNECTION_TIMEOUT_MS,
        auth: tuple[str, str] | None = None,
    ) -> None:
        self._attach(
            RegistryNodes(
                cluster_options(  # the one check of the cluster options (OptionError)
                    zk_connect=zk_connect,
                    zk_session_timeout_ms=session_timeout_ms,
                    zk_connection_timeout_ms=connection_timeout_ms,
                    zk_auth=auth,
                )
            )
        )

    @classmethod
    def from_options(cls, options: ClusterOptions) -> Registry:
        """The registry ``options.zk_connect`` names; ``options`` were checked when parsed."""
        registry = cls.__new__(cls)
        registry._attach(RegistryNodes(options))
        return registry

    def _attach(self, nodes: RegistryNodes) -> None:
        self._nodes = nodes
        self._zk = nodes.zk
        self._groups = ConsumerGroups(nodes)
        self.zk_connect = nodes.zk_connect
        self.chroot = nodes.chroot
        self.session_timeout_ms = nodes.session_timeout_ms
        self.connection_timeout_ms = nodes.connection_timeout_ms

    def at_root(self) -> Registry:
        """The same ZooKeeper, credentials and timeouts without the chroot (to look for the
        registry elsewhere when this one holds none: :mod:`kafka_pyspark._cluster.chroot_hints`)."""
        hosts = self.zk_connect.partition("/")[0]
        return Registry.from_options(replace(self._nodes.options, zk_connect=hosts))

    # --- lifecycle ---------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Registry({self.zk_connect!r})"

    def close(self) -> None:
        """End the ZooKeeper session. Idempotent."""
        self._nodes.close()

    @property
    def connected(self) -> bool:
        """True while the session is connected (False before first use and while kazoo is
        reconnecting): a call made now is likely to be answered promptly."""
        return self._nodes.connected

    def children(self, paths: Sequence[str]) -> list[list[str] | None]:
        """The children of each of ``paths`` (None: no such node), in one pipelined round."""
        return self._nodes.children(paths)

    # --- brokers and topics ------------------------------------------------------------------

    def brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers from ``/brokers/ids/[id]`` = ``creator:host:port`` ({} if none).

        The value is split on ``:`` and must have exactly three fields (docs/dev/PROTOCOL.md "Broker
        registry": "always split on ':' and extract the host that will be the second element"); the
        id is the node name. A broker that vanishes between listing and reading is left out.
        """
        names = self._zk.children(BROKER_IDS) or []
        paths = self._id_paths(BROKER_IDS, names)
        return self._brokers_from(names, paths, self._nodes.values(paths))

    def _id_paths(self, base: str, names: Sequence[str]) -> list[str]:
        """``base/[id]`` for each child name, every name checked to be a broker id."""
        paths = [f"{base}/{n}" for n in names]
        for name, path in zip(names, paths, strict=True):
            if not is_decimal(name):
                self._nodes.fail(path, f"broker id {name!r} is not a non-negative integer")
        return paths

    def _brokers_from(
        self, names: Sequence[str], paths: Sequence[str], values: Sequence[bytes | None]
    ) -> dict[int, BrokerInfo]:
        return _by_id(names, paths, values, self._parse_broker)

    def _counts_from(
        self, names: Sequence[str], paths: Sequence[str], values: Sequence[bytes | None]
    ) -> dict[int, int]:
        return _by_id(names, paths, values,
                      lambda _, path, raw: self._nodes.decimal(path, raw, "partition count"))

    def topology(
        self, topics: Sequence[str]
    ) -> tuple[dict[int, BrokerInfo], dict[str, dict[int, int]]]:
        """:meth:`brokers` and :meth:`topic_partitions` of each of ``topics`` at once, in two
        pipelined rounds (every listing, then every value) whatever the number of topics: a
        stream reads this before each micro-batch."""
        for topic in topics:
            validate_topic_name(topic)
        bases = [f"{BROKER_TOPICS}/{t}" for t in topics]
        listed = self._zk.children_of([BROKER_IDS, *bases], "/brokers")
        names = [names or [] for names in listed]
        paths = [self._id_paths(base, n) for base, n in zip([BROKER_IDS, *bases], names,
                                                            strict=True)]
        split = self._nodes.values_of(paths)
        brokers = self._brokers_from(names[0], paths[0], split[0])
        counts = {
            topic: self._counts_from(n, ps, vs)
            for topic, n, ps, vs in zip(topics, names[1:], paths[1:], split[1:], strict=True)
        }
        return brokers, counts

    def _parse_broker(self, broker_id: int, path: str, raw: bytes) -> BrokerInfo:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._nodes.fail(path, f"value is not UTF-8: {raw!r}")
        fields = text.split(":")
        if len(fields) != 3:
            self._nodes.fail(path, f"value must be 'creator:host:port', got {text!r}")
        creator, host, port_text = fields
        if not host or host != host.strip():
            self._nodes.fail(path, f"empty or padded host in {text!r}")
        problem = host_problem(host)
        if problem is not None:
            self._nodes.fail(path, problem)
        port = port_number(port_text)
        if port is None:
            self._nodes.fail(path, f"bad port {port_text!r} in {text!r}")
        return BrokerInfo(id=broker_id, host=host, port=port, creator=creator)

    def topics(self) -> list[str]:
        """Topic names under ``/brokers/topics``, sorted ([] if none)."""
        return sorted(self._zk.children(BROKER_TOPICS) or [])

    def topic_partitions(self, topic: str) -> dict[int, int]:
        """``/brokers/topics/[topic]/[id]`` = partition count: {broker id: count} ({} if the
        topic is not registered). Sorted by broker id."""
        validate_topic_name(topic)
        base = f"{BROKER_TOPICS}/{topic}"
        names = self._zk.children(base) or []
        paths = self._id_paths(base, names)
        return self._counts_from(names, paths, self._nodes.values(paths))


    # --- consumer groups (ConsumerGroups, groups.py, has each one's description) --------------

    def groups(self) -> list[str]:
        """Consumer group names under ``/consumers``, sorted."""
        return self._groups.groups()

    def consumer_ids(self, group: str) -> list[str]:
        """Registered (live) consumer ids of ``group``, sorted."""
        return self._groups.consumer_ids(group)

    def group_topics(self, group: str) -> list[str]:
        """Topics ``group`` committed offsets for, sorted."""
        return self._groups.group_topics(group)

    def group_owners(self, group: str, topic: str) -> dict[tuple[int, int], str]:
        """{(broker, partition): consumer thread id} of ``group`` for ``topic``."""
        return self._groups.group_owners(group, topic)

    def group_owners_of(
        self, group: str, topics: Sequence[str]
    ) -> dict[str, dict[tuple[int, int], str]]:
        """:meth:`group_owners` of each of ``topics``, in two pipelined rounds."""
        return self._groups.group_owners_of(group, topics)

    def group_offsets(self, group: str, topic: str) -> dict[tuple[int, int], int]:
        """{(broker, partition): committed offset} of ``group`` for ``topic`` ({} if none)."""
        return self._groups.group_offsets(group, topic)

    def group_offsets_checked(
        self, group: str, topic: str
    ) -> tuple[dict[tuple[int, int], int], dict[str, str]]:
        """:meth:`group_offsets`, and the malformed nodes as {node name: error text}."""
        return self._groups.group_offsets_checked(group, topic)

    def group_offsets_of(
        self, group: str, topics: Sequence[str]
    ) -> dict[str, tuple[dict[tuple[int, int], int], dict[str, str]]]:
        """:meth:`group_offsets_checked` of each of ``topics``, in two pipelined rounds."""
        return self._groups.group_offsets_of(group, topics)

    def commit_group_offsets(
        self, group: str, topic: str, offsets: Mapping[tuple[int, int], int], *, creator: str
    ) -> None:
        """Write ``offsets`` as 0.7's consumer does (missing nodes and parents created)."""
        self._groups.commit_group_offsets(group, topic, offsets, creator=creator)

    def commit_group_offsets_of(
        self,
        group: str,
        offsets: Mapping[str, Mapping[tuple[int, int], int]],
        *,
        creator: str,
        listed: bool = False,
    ) -> None:
        """:meth:`commit_group_offsets` of several topics (``{topic: offsets}``) at once."""
        self._groups.commit_group_offsets_of(group, offsets, creator=creator, listed=listed)
