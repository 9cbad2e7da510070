"""Kafka 0.7's consumer groups in ZooKeeper: their offsets, owners and consumers read, and
their offsets committed, as 0.7's ``ZookeeperConsumerConnector`` does (the module docstring
of :mod:`kafka_pyspark._cluster.registry` describes the nodes and their format).

A first commit creates thousands of nodes: they go out in one pipelined round, in ``multi``
transactions where the server has them (:meth:`ZkSession.create
<kafka_pyspark._cluster.zk_session.ZkSession.create>`), so its cost is a few requests rather than
one per node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_pyspark._cluster.nodes import CONSUMERS, RegistryNodes, decimal_problem
from kafka_pyspark._cluster.zk_session import Created
from kafka_pyspark._shared.partition_key import (
    check_group_id,
    not_a_partition_key,
    parse_partition_key,
    partition_key,
)
from kafka_pyspark._wire.topics import validate_topic_name
from kafka_pyspark.errors import OptionError, RegistryError

__all__ = ["ConsumerGroups"]


class ConsumerGroups:
    """A registry's consumer groups: read, and offsets committed, over the registry's
    :class:`RegistryNodes` (:class:`~kafka_pyspark._cluster.registry.Registry` offers each
    method below under the same name)."""

    def __init__(self, nodes: RegistryNodes) -> None:
        self._nodes = nodes
        self._zk = nodes.zk

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
        bad = self._nodes.bad
        for topic, base, nodes in zip(topics, bases, self._partition_nodes_of(bases),
                                      strict=True):
            offsets: dict[tuple[int, int], int] = {}
            problems: dict[str, str] = {}
            for name, key, raw in nodes:
                path = f"{base}/{name}"
                if key is None:
                    problems[name] = str(bad(path, f"node name {not_a_partition_key(name)}"))
                    continue
                problem = decimal_problem(raw, "offset")
                if problem is not None:
                    problems[name] = str(bad(path, problem))
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
        values = self._nodes.values_of([[f"{base}/{n}" for n in names]
                                  for base, names in zip(bases, listed, strict=True)])
        return [
            [(name, parse_partition_key(name), raw)
             for name, raw in zip(names, raws, strict=True) if raw is not None]
            for names, raws in zip(listed, values, strict=True)
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
                there = f"chroot {self._nodes.chroot!r}" if self._nodes.chroot else "parent"
                raise self._nodes.bad(path, f"cannot create it: the {there} does not exist")
        raced = []
        for (path, v), result in zip(missing, done[len(parents):], strict=True):
            if result is Created.NO_PARENT:
                raise self._nodes.bad(path, "its parent vanished while committing offsets")
            if result is Created.EXISTS:
                raced.append((path, v))
        if raced:
            self._zk.set_values(raced, where)

    def _inherited_acls(self, paths: Sequence[str]) -> dict[str, list[Any] | None]:
        """With ``auth``: for each of ``paths`` (each one's parent is ``/`` or listed before
        it), its own ACL, or, if it does not exist, the one it inherits from its parent: the
        ACLs of all of them read in one round (and ``/``'s in one more when the first does
        not exist). Without: None for each (ZooKeeper's default open ACL)."""
        if not self._zk.has_auth:
            return dict.fromkeys(paths)
        own = self._zk.acls_of(paths, f"{CONSUMERS}/*")
        out: dict[str, list[Any] | None] = {"/": self._zk.acls("/") if own[0] is None else None}
        for path, acl in zip(paths, own, strict=True):
            out[path] = acl if acl is not None else out[path.rsplit("/", 1)[0] or "/"]
        del out["/"]
        return out


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
