"""The requests a :class:`~kafka_pyspark._cluster.zk_session.ZkSession` sends, and how many nodes go
in one: each request is a kazoo ``*_async`` call (made when sent, so it can be sent again after a
lost connection); many writes go in ``multi`` transactions and many reads in ``multiRead``
requests (:mod:`kafka_pyspark._cluster.zk_reads`), cut by :func:`chunks` to stay far below the
server's request size limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kafka_pyspark._cluster.zk_reads import MULTI, MULTI_READ, send_multi_read

__all__ = [
    "MULTI_BYTES", "MULTI_SIZE", "NewNode", "Request", "chunks", "create", "delete", "get",
    "get_acls",
    "get_children", "multi_read", "op_bytes", "path_bytes", "set_value", "transaction",
]

#: nodes per ``multi`` transaction: kazoo's cost is per request, ZooKeeper's per node; a few
#: hundred small creates stay far below the server's request size limit (jute.maxbuffer, 1 MiB)
MULTI_SIZE = 500
#: bytes of paths, values and ACLs per ``multi`` or ``multiRead`` request: long node names (a
#: long group id or chroot) make fewer nodes per request, each far below jute.maxbuffer, which
#: the server answers by closing the connection (a request over it would never succeed)
MULTI_BYTES = 256 << 10
#: what a node adds to such a request besides its path, value and ACL ids (headers, lengths)
_OP_OVERHEAD = 32

#: a node to create: path, value, ACL (None: ZooKeeper's default open ACL)
NewNode = tuple[str, bytes, "list[Any] | None"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Request:
    node: str  # the node it is about (named when its ACL refuses it)
    send: Callable[[Any], Any]  # kazoo client -> its IAsyncResult
    kind: str | None = None  # MULTI or MULTI_READ (zk_reads): a request of many nodes


def get_children(path: str) -> Request:
    return Request(path, lambda client: client.get_children_async(path))


def get(path: str) -> Request:
    return Request(path, lambda client: client.get_async(path))


def get_acls(path: str) -> Request:
    return Request(path, lambda client: client.get_acls_async(path))


def set_value(path: str, value: bytes) -> Request:
    return Request(path, lambda client: client.set_async(path, value))


def create(path: str, value: bytes, acl: list[Any] | None, *, ephemeral: bool = False) -> Request:
    return Request(path, lambda client: client.create_async(path, value, acl, ephemeral=ephemeral))


def delete(path: str) -> Request:
    return Request(path, lambda client: client.delete_async(path))


def multi_read(paths: Sequence[str]) -> Request:
    return Request(paths[0], lambda client: send_multi_read(client, paths), MULTI_READ)


def transaction(items: Sequence[_T], add: Callable[[Any, _T], object], where: str) -> Request:
    """One ``multi`` transaction of ``add(transaction, item)`` for each of ``items``: all of
    them, or none (its answer lists an exception per item then)."""

    def send(client: Any) -> Any:
        tx = client.transaction()
        for item in items:
            add(tx, item)
        return tx.commit_async()

    return Request(where, send, MULTI)


def chunks(items: Sequence[_T], size: Callable[[_T], int]) -> list[Sequence[_T]]:
    """``items`` cut into requests of at most :data:`MULTI_SIZE` nodes and :data:`MULTI_BYTES`
    (by ``size``; a node larger than that alone)."""
    out: list[Sequence[_T]] = []
    first, total = 0, 0
    for i, item in enumerate(items):
        n = size(item)
        if i > first and (i - first == MULTI_SIZE or total + n > MULTI_BYTES):
            out.append(items[first:i])
            first, total = i, 0
        total += n
    if first < len(items):
        out.append(items[first:])
    return out


def path_bytes(path: str) -> int:
    """About what reading one node adds to a ``multiRead`` request."""
    return len(path.encode("utf-8")) + _OP_OVERHEAD


def op_bytes(item: Any) -> int:
    """About what one node ``(path, value[, acl])`` adds to a transaction's request."""
    path, value, *rest = item
    acl = rest[0] if rest and rest[0] is not None else []
    ids = sum(len(a.id.scheme) + len(a.id.id) + _OP_OVERHEAD for a in acl)
    return path_bytes(path) + len(value) + ids
