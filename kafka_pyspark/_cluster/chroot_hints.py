"""Where Kafka 0.7's registry is when ``zk.connect`` shows none: the chroot diagnosis.

A ``zk.connect`` without the cluster's chroot (``zk1:2181`` for brokers registered under
``zk1:2181/kafka``), or with a wrong one, shows no ``/brokers/ids``: a read would find no topic
and a stream would run empty. These functions run only on that error path: with a second, short
ZooKeeper session without the chroot (same credentials and timeouts), they look at the ZooKeeper
root itself (when a chroot was given), one level below it and below the given chroot for nodes
holding a registry, and name them.
Looking around is best effort: if ZooKeeper refuses it, the error says what it knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._cluster.registry import BROKER_IDS, BROKER_TOPICS
from kafka_pyspark.errors import NoBrokersRegisteredError, RegistryError

if TYPE_CHECKING:
    from kafka_pyspark._cluster.registry import Registry

__all__ = ["Found", "no_brokers_error", "topic_elsewhere"]

#: children looked at per level (the error path's I/O stays bounded on a crowded ZooKeeper)
MAX_LOOKED_AT = 200
#: ZooKeeper's own node at its root, never a chroot
_ZOOKEEPER_NODE = "/zookeeper"
#: nodes quoted in one error (registries found, or the root's children when none is)
MAX_SHOWN = 10


@dataclass(frozen=True)
class Found:
    """A node holding ``<chroot><probe>`` (``""``: the ZooKeeper root), and how many children
    that node has."""

    chroot: str
    children: int


def no_brokers_error(registry: Registry) -> NoBrokersRegisteredError:
    """The error for a registry that shows no broker: which path is missing or empty, and
    where else on this ZooKeeper a registry is (call it only when no broker was found)."""
    ids = f"{registry.chroot or ''}{BROKER_IDS}"
    listed = registry.children([BROKER_IDS])[0]
    what = f"has no node {ids}" if listed is None else f"has no broker registered in {ids}"
    looked = _look_around(registry, BROKER_IDS)
    found, roots = looked or ([], [])
    if found:
        advice = _use_instead(registry, found, "registered", "a Kafka registry is")
    elif listed is not None:
        advice = "are the brokers down?"
    elif registry.chroot and looked is None:
        advice = (f"check the chroot {registry.chroot} (where else on this ZooKeeper a registry "
                  "is could not be looked up)")
    elif registry.chroot:
        advice = (f"check the chroot {registry.chroot}: no node at the ZooKeeper root holds "
                  f"{BROKER_IDS[1:]}{_root_listing(roots)}")
    else:
        advice = ("is it the cluster's ZooKeeper, and does the cluster register under a chroot "
                  f"(zk.connect 'host:port/chroot')?{_root_listing(roots)}")
    return NoBrokersRegisteredError(f"ZooKeeper {registry.zk_connect} {what}: {advice}")


def topic_elsewhere(registry: Registry, topic: str) -> str:
    """A hint for a topic the registry lacks: the chroots where it is registered, or that
    this registry holds no topic at all (``""``: nothing to add)."""
    found = (_look_around(registry, f"{BROKER_TOPICS}/{topic}") or ([], []))[0]
    if found:
        return "; " + _use_instead(registry, found, "holding it", "it is registered")
    if not registry.topics():
        where = f"{registry.chroot or ''}{BROKER_TOPICS}"
        return f"; {where} holds no topic at all: check the chroot in zk.connect"
    return ""


def _use_instead(registry: Registry, found: Sequence[Found], counted: str, what: str) -> str:
    """``<what> under /a (2 brokers <counted>), /b (...): use zk.connect 'hosts/a'``: the
    nodes with a broker first, the first of them suggested; at most :data:`MAX_SHOWN`."""
    hosts = registry.zk_connect.partition("/")[0]
    ranked = sorted(found, key=lambda f: f.children == 0)
    listing = _shown([
        f"{f.chroot or '/'} ({f.children} broker{'' if f.children == 1 else 's'} {counted})"
        for f in ranked
    ])
    return f"{what} under {listing}: use zk.connect '{hosts}{ranked[0].chroot}'"


def _root_listing(roots: Sequence[str]) -> str:
    return f" (the ZooKeeper root holds: {_shown(roots)})" if roots else ""


def _shown(items: Sequence[str]) -> str:
    return ", ".join(items[:MAX_SHOWN]) + (", ..." if len(items) > MAX_SHOWN else "")


def _look_around(registry: Registry, probe: str) -> tuple[list[Found], list[str]] | None:
    """The nodes one level below the root and below the chroot that hold ``<node><probe>``
    (with its child count), and the root's children; None if ZooKeeper refuses or fails."""
    try:
        with registry.at_root() as root:
            bases = ["/", *([registry.chroot] if registry.chroot else [])]
            listed = root.children(bases)
            candidates = [
                f"{base.rstrip('/')}/{name}"
                for base, names in zip(bases, listed, strict=True)
                for name in sorted(names or [])[:MAX_LOOKED_AT]
            ]
            candidates = [c for c in candidates if c not in (registry.chroot, _ZOOKEEPER_NODE)]
            if registry.chroot:  # the cluster may register at the root itself
                candidates.insert(0, "")
            held = root.children([f"{c}{probe}" for c in candidates]) if candidates else []
    except RegistryError:
        return None
    found = [Found(c, len(n)) for c, n in zip(candidates, held, strict=True) if n is not None]
    roots = [f"/{name}" for name in sorted(listed[0] or []) if f"/{name}" != _ZOOKEEPER_NODE]
    return found, roots
