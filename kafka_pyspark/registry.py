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
calls and the translation of kazoo's exceptions are :mod:`kafka_pyspark.zk_session`.

Access control: ``auth=("digest", "user:password")`` (options ``zk.auth.user`` +
``zk.auth.password``, parsed by :mod:`kafka_pyspark.zk_auth`) adds those digest credentials to
the session, as zkCli's ``addauth digest user:password`` does, so nodes whose ACL grants that
identity can be read and written. The credentials are never logged and never
appear in errors or reprs. Nodes the registry creates (group offset nodes and their parents)
get ZooKeeper's default open ACL unless ``auth`` is given; then they get the ACL of their
nearest existing ancestor, so a group locked down by its operator stays locked down.
kazoo's own log lines go to :data:`kafka_pyspark.zk_auth.KAZOO_LOG` with credentials removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any, NoReturn, TypeVar

from kafka_pyspark import defaults
from kafka_pyspark._closing import Closing
from kafka_pyspark.cluster_options import (
    BrokerAddress,
    ClusterOptions,
    cluster_options,
    host_problem,
    port_number,
    zk_chroot,
)
from kafka_pyspark.errors import OptionError, RegistryError
from kafka_pyspark.names import (
    check_group_id,
    is_decimal,
    not_a_partition_key,
    parse_partition_key,
    partition_key,
)
from kafka_pyspark.wire.topics import validate_topic_name
from kafka_pyspark.zk_session import Created, ZkSession

__all__ = ["BrokerInfo", "Registry"]

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONSUMERS = "/consumers"

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
        self._setup(
            cluster_options(  # the one check of the cluster options (OptionError)
                zk_connect=zk_connect,
                zk_session_timeout_ms=session_timeout_ms,
                zk_connection_timeout_ms=connection_timeout_ms,
                zk_auth=auth,
            )
        )

    @classmethod
    def from_options(cls, options: ClusterOptions) -> Registry:
        """The registry ``options.zk_connect`` names; ``options`` were checked when parsed."""
        registry = cls.__new__(cls)
        registry._setup(options)
        return registry

    def _setup(self, options: ClusterOptions) -> None:
        if options.zk_connect is None:
            raise OptionError("zk.connect", "is required by the ZooKeeper registry")
        self.zk_connect = options.zk_connect
        self.chroot: str | None = zk_chroot(options.zk_connect)
        self.session_timeout_ms = options.zk_session_timeout_ms
        self.connection_timeout_ms = options.zk_connection_timeout_ms
        self._options = options
        self._zk = ZkSession(
            self.zk_connect,
            session_timeout_ms=self.session_timeout_ms,
            connection_timeout_ms=self.connection_timeout_ms,
            # (scheme, credential) pairs for kazoo; never logged, never in a message or repr
            auth_data=[options.zk_auth] if options.zk_auth is not None else [],
        )

    # --- lifecycle ---------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Registry({self.zk_connect!r})"

    def close(self) -> None:
        """End the ZooKeeper session. Idempotent."""
        self._zk.close()

    @property
    def connected(self) -> bool:
        """True while the session is connected (False before first use and while kazoo is
        reconnecting): a call made now is likely to be answered promptly."""
        return self._zk.connected

    def at_root(self) -> Registry:
        """The same ZooKeeper, credentials and timeouts without the chroot (to look for the
        registry elsewhere when this one holds none: :mod:`kafka_pyspark.chroot_hints`)."""
        hosts = self.zk_connect.partition("/")[0]
        return Registry.from_options(replace(self._options, zk_connect=hosts))

    def children(self, paths: Sequence[str]) -> list[list[str] | None]:
        """The children of each of ``paths`` (None: no such node), in one pipelined round."""
        return self._zk.children_of(paths, paths[0] if len(paths) == 1 else "/*")

    # --- reading nodes -------------------------------------------------------------------------

    def _values(self, paths: list[str]) -> list[bytes | None]:
        """Values of ``paths`` fetched in one pipelined round (None for vanished nodes)."""
        if not paths:
            return []
        return self._zk.values(paths, paths[0].rsplit("/", 1)[0] + "/*")

    def _bad(self, path: str, problem: str) -> RegistryError:
        return RegistryError(f"ZooKeeper {self.zk_connect}: node {path}: {problem}")

    def _decimal(self, path: str, raw: bytes, what: str) -> int:
        problem = _decimal_problem(raw, what)
        if problem is not None:
            self._raise(path, problem)
        return int(raw)

    def _raise(self, path: str, problem: str) -> NoReturn:
        raise self._bad(path, problem)

    # --- brokers and topics ------------------------------------------------------------------

    def brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers from ``/brokers/ids/[id]`` = ``creator:host:port`` ({} if none).

        The value is split on ``:`` and must have exactly three fields (docs/dev/PROTOCOL.md "Broker
        registry": "always split on ':' and extract the host that will be the second element"); the
        id is the node name. A broker that vanishes between listing and reading is left out.
        """
        names = self._zk.children(BROKER_IDS) or []
        paths = self._id_paths(BROKER_IDS, names)
        return self._brokers_from(names, paths, self._values(paths))

    def _id_paths(self, base: str, names: Sequence[str]) -> list[str]:
        """``base/[id]`` for each child name, every name checked to be a broker id."""
        paths = [f"{base}/{n}" for n in names]
        for name, path in zip(names, paths, strict=True):
            if not is_decimal(name):
                self._raise(path, f"broker id {name!r} is not a non-negative integer")
        return paths

    def _brokers_from(
        self, names: Sequence[str], paths: Sequence[str], values: Sequence[bytes | None]
    ) -> dict[int, BrokerInfo]:
        return _by_id(names, paths, values, self._parse_broker)

    def _counts_from(
        self, names: Sequence[str], paths: Sequence[str], values: Sequence[bytes | None]
    ) -> dict[int, int]:
        return _by_id(names, paths, values,
                      lambda _, path, raw: self._decimal(path, raw, "partition count"))

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
        values = iter(self._values([p for group in paths for p in group]))
        split = [list(islice(values, len(group))) for group in paths]
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
            self._raise(path, f"value is not UTF-8: {raw!r}")
        fields = text.split(":")
        if len(fields) != 3:
            self._raise(path, f"value must be 'creator:host:port', got {text!r}")
        creator, host, port_text = fields
        if not host or host != host.strip():
            self._raise(path, f"empty or padded host in {text!r}")
        problem = host_problem(host)
        if problem is not None:
            self._raise(path, problem)
        port = port_number(port_text)
        if port is None:
            self._raise(path, f"bad port {port_text!r} in {text!r}")
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
        return self._counts_from(names, paths, self._values(paths))

    # --- consumer groups ---------------------------------------------------------------------

    def groups(self) -> list[str]:
        """Consumer group names under ``/consumers``, sorted."""
        return sorted(self._zk.children(CONSUMERS) or [])

    def consumer_ids(self, group: str) -> list[str]:
        """Registered (live) consumer ids of ``group``: ``/consumers/[group]/ids``, sorted."""
        group = check_group_id(group)
        return sorted(self._zk.children(f"{CONSUMERS}/{group}/ids") or [])

    def group_topics(self, group: str) -> list[str]:
        """Topics ``group`` committed offsets for: ``/consumers/[group]/offsets``, sorted."""
        group = check_group_id(group)
        return sorted(self._zk.children(f"{CONSUMERS}/{group}/offsets") or [])

    def group_owners(self, group: str, topic: str) -> dict[tuple[int, int], str]:
        """Current owners ``/consumers/[group]/owners/[topic]/[bid]-[pid]`` -> consumer
        thread id; a node whose name is not ``[bid]-[pid]`` is left out (nobody reads it)."""
        return self.group_owners_of(group, [topic])[topic]

    def group_owners_of(
        self, group: str, topics: Sequence[str]
    ) -> dict[str, dict[tuple[int, int], str]]:
        """:meth:`group_owners` of each of ``topics``, in two pipelined rounds (every
        listing, then every value) whatever the number of topics."""
        bases = [self._group_topic_path(group, t, "owners") for t in topics]
        return {
            topic: dict(sorted((key, raw.decode("utf-8", "replace"))
                               for _name, key, raw in nodes if key is not None))
            for topic, nodes in zip(topics, self._partition_nodes_of(bases), strict=True)
        }

    def group_offsets(self, group: str, topic: str) -> dict[tuple[int, int], int]:
        """Committed offsets ``/consumers/[group]/offsets/[topic]/[bid]-[pid]`` (decimal
        string of the next byte offset) as {(broker, partition): offset}; {} if none. A node
        not in 0.7's format is a :class:`RegistryError` naming it."""
        offsets, problems = self.group_offsets_checked(group, topic)
        if problems:
            raise RegistryError(next(iter(problems.values())))
        return offsets

    def group_offsets_checked(
        self, group: str, topic: str
    ) -> tuple[dict[tuple[int, int], int], dict[str, str]]:
        """:meth:`group_offsets`, and the nodes not in 0.7's format (a name that is not
        ``[bid]-[pid]``, a value that is not a non-negative decimal) as {node name: error
        text naming the node} instead of an error: a table can still show the others."""
        return self.group_offsets_of(group, [topic])[topic]

    def group_offsets_of(
        self, group: str, topics: Sequence[str]
    ) -> dict[str, tuple[dict[tuple[int, int], int], dict[str, str]]]:
        """:meth:`group_offsets_checked` of each of ``topics``, in two pipelined rounds
        (every listing, then every value) whatever the number of topics."""
        bases = [self._group_topic_path(group, t, "offsets") for t in topics]
        out: dict[str, tuple[dict[tuple[int, int], int], dict[str, str]]] = {}
        for topic, base, nodes in zip(topics, bases, self._partition_nodes_of(bases),
                                      strict=True):
            offsets: dict[tuple[int, int], int] = {}
            problems: dict[str, str] = {}
            for name, key, raw in nodes:
                path = f"{base}/{name}"
                if key is None:
                    problems[name] = str(self._bad(path, f"node name {not_a_partition_key(name)}"))
                    continue
                problem = _decimal_problem(raw, "offset")
                if problem is not None:
                    problems[name] = str(self._bad(path, problem))
                else:
                    offsets[key] = int(raw)
            out[topic] = (dict(sorted(offsets.items())), problems)
        return out

    def _group_topic_path(self, group: str, topic: str, kind: str) -> str:
        group = check_group_id(group)
        validate_topic_name(topic)
        return f"{CONSUMERS}/{group}/{kind}/{topic}"

    def _partition_nodes_of(
        self, bases: Sequence[str]
    ) -> list[list[tuple[str, tuple[int, int] | None, bytes]]]:
        """(name, ``[bid]-[pid]`` key or None, value) of every child still there of each of
        ``bases``, in two pipelined rounds."""
        if not bases:
            return []
        where = bases[0].rsplit("/", 1)[0] + "/*"
        listed = [sorted(names or []) for names in self._zk.children_of(bases, where)]
        paths = [f"{base}/{n}" for base, names in zip(bases, listed, strict=True) for n in names]
        values = iter(self._values(paths))
        return [
            [(name, parse_partition_key(name), raw)
             for name, raw in zip(names, islice(values, len(names)), strict=True)
             if raw is not None]
            for names in listed
        ]

    def commit_group_offsets(
        self,
        group: str,
        topic: str,
        offsets: Mapping[tuple[int, int], int],
        *,
        creator: str,
    ) -> None:
        """Write ``offsets`` as 0.7's consumer does: persistent nodes
        ``/consumers/[group]/offsets/[topic]/[bid]-[pid]`` = decimal next byte offset.

        Existing nodes are overwritten (``set``); missing ones are created, and so are missing
        parents (``/consumers``, ``/consumers/[group]``, ``.../offsets``, ``.../[topic]``),
        each holding ``creator`` (the committer's id) as its value. Parents that exist keep
        their value.
        """
        self.commit_group_offsets_of(group, {topic: offsets}, creator=creator)

    def commit_group_offsets_of(
        self,
        group: str,
        offsets: Mapping[str, Mapping[tuple[int, int], int]],
        *,
        creator: str,
        listed: bool = False,
    ) -> None:
        """:meth:`commit_group_offsets` of several topics (``{topic: offsets}``) at once: one
        pipelined round of writes; only when nodes are missing, one round that creates them
        and the parents they lack (:meth:`_create_missing`), whatever the number of topics
        and nodes. ``listed``: list the topics' nodes first (one round) and write only those
        there, so that a first commit, which creates most of its nodes, does not first try
        to write every one of them."""
        if not isinstance(creator, str) or not creator:
            raise OptionError("creator", "the committer id must be a non-empty string")
        bases = {t: self._group_topic_path(group, t, "offsets") for t in sorted(offsets)}
        items = [it for t, base in bases.items() for it in _offset_nodes(base, offsets[t])]
        if not items:
            return
        where = f"{CONSUMERS}/{check_group_id(group)}/offsets/*/*"
        missing: list[tuple[str, bytes]] = []
        if listed:
            there = {f"{base}/{name}" for base, names in zip(
                bases.values(), self._zk.children_of(list(bases.values()), where), strict=True)
                for name in names or ()}
            missing = [it for it in items if it[0] not in there]
            items = [it for it in items if it[0] in there]
        written = self._zk.set_values(items, where) if items else []
        missing += [it for it, ok in zip(items, written, strict=True) if not ok]
        if missing:
            self._create_missing(group, missing, creator.encode("utf-8"), where)

    def _create_missing(self, group: str, missing: Sequence[tuple[str, bytes]], value: bytes,
                        where: str) -> None:
        """Create the offset nodes ``missing`` and the parents they lack (holding ``value``),
        each with the ACL of its nearest existing ancestor, in one pipelined round (plus one
        to read the ACLs, with ``auth``): parents first, then the nodes in ``multi``
        transactions. A node another committer created meanwhile is overwritten."""
        group_base = f"{CONSUMERS}/{check_group_id(group)}/offsets"
        parts = group_base.strip("/").split("/")
        parents = ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        parents += sorted({path.rsplit("/", 1)[0] for path, _ in missing})
        acls = self._inherited_acls(parents)
        done = self._zk.create(
            [(p, value, acls[p]) for p in parents], where,
            together=[(path, v, acls[path.rsplit("/", 1)[0]]) for path, v in missing])
        for path, result in zip(parents, done[:len(parents)], strict=True):
            if result is Created.NO_PARENT:
                there = f"chroot {self.chroot!r}" if self.chroot else "parent"
                raise self._bad(path, f"cannot create it: the {there} does not exist")
        raced = []
        for (path, v), result in zip(missing, done[len(parents):], strict=True):
            if result is Created.NO_PARENT:
                raise self._bad(path, "its parent vanished while committing offsets")
            if result is Created.EXISTS:
                raced.append((path, v))
        if raced:
            self._zk.set_values(raced, where)

    def _inherited_acls(self, paths: Sequence[str]) -> dict[str, list[Any] | None]:
        """With ``auth``: for each of ``paths`` (each one's parent is ``/`` or listed before
        it), its own ACL, or, if it does not exist, the one it inherits from its parent: the
        ACLs of all of them and of ``/`` read in one round. Without: None for each
        (ZooKeeper's default open ACL)."""
        if not self._zk.has_auth:
            return dict.fromkeys(paths)
        own = self._zk.acls_of(["/", *paths], f"{CONSUMERS}/*")
        out: dict[str, list[Any] | None] = {"/": own[0]}
        for path, acl in zip(paths, own[1:], strict=True):
            out[path] = acl if acl is not None else out[path.rsplit("/", 1)[0] or "/"]
        del out["/"]
        return out


def _decimal_problem(raw: bytes, what: str) -> str | None:
    """Why ``raw`` is not a node value in 0.7's decimal format (None if it is)."""
    if is_decimal(raw.decode("ascii", "replace")):
        return None
    return f"{what} must be a non-negative decimal integer, got {raw!r}"


def _offset_nodes(
    base: str, offsets: Mapping[tuple[int, int], int]
) -> list[tuple[str, bytes]]:
    """``(node, value)`` per committed offset, checked: 0.7's name and decimal ASCII value."""
    items: list[tuple[str, bytes]] = []
    for key, offset in sorted(offsets.items()):
        broker, partition = key
        for what, v in (("broker id", broker), ("partition", partition), ("offset", offset)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise OptionError(
                    "offsets", f"{what} must be a non-negative integer, got {v!r} for {key}"
                )
        items.append((f"{base}/{partition_key(broker, partition)}", str(offset).encode("ascii")))
    return items
