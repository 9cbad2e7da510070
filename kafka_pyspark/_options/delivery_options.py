"""The delivery options of a write (docs/writing.md "Exactly once"), parsed once on the driver.

* ``delivery.guarantee``: ``exactly-once`` or ``at-least-once``; default exactly-once when
  there is a store (``zk.connect``, or ``delivery.store``), else at-least-once.
* ``delivery.zk.root``: the ZooKeeper node the sink's records go under (``/kafka_pyspark/sinks``).
* ``delivery.store``: a directory all executors share, the store instead of ZooKeeper.
* ``delivery.lock.timeout.ms``: how long a task's second attempt waits for the first's lock.
* ``delivery.visibility.wait.ms``: how long a retry waits for an earlier attempt's sets to
  become readable before sending them again.

Defaults: :mod:`kafka_pyspark._shared.defaults`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_pyspark._cluster import ClusterOptions
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.option_values import int_option
from kafka_pyspark.errors import OptionError

__all__ = [
    "AT_LEAST_ONCE",
    "DELIVERY_NAMES",
    "EXACTLY_ONCE",
    "GUARANTEES",
    "DeliveryOptions",
    "parse_delivery_options",
]

log = logging.getLogger(__name__)

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
GUARANTEES = (EXACTLY_ONCE, AT_LEAST_ONCE)
#: the option names (canonical spelling = lower case)
DELIVERY_NAMES = (
    "delivery.guarantee",
    "delivery.zk.root",
    "delivery.store",
    "delivery.lock.timeout.ms",
    "delivery.visibility.wait.ms",
)
_MAX_MS = 24 * 3600 * 1000
_defaulted_logged = False


@dataclass(frozen=True)
class DeliveryOptions:
    """How a write delivers: the guarantee and, for exactly-once, where its records go."""

    guarantee: str = AT_LEAST_ONCE
    #: ZooKeeper node (under the ``zk.connect`` chroot) the sink's records go under
    zk_root: str = defaults.DELIVERY_ZK_ROOT
    #: a shared directory: the record store instead of ZooKeeper
    store: str | None = None
    lock_timeout_ms: int = defaults.DELIVERY_LOCK_TIMEOUT_MS
    visibility_wait_ms: int = defaults.DELIVERY_VISIBILITY_WAIT_MS

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == EXACTLY_ONCE


def _zk_root(raw: str) -> str:
    value = raw.strip()
    if not value.startswith("/") or value == "/" or value.endswith("/") or "//" in value:
        raise OptionError(
            "delivery.zk.root",
            f"must be an absolute ZooKeeper path like '/kafka_pyspark/sinks', got {raw!r}",
        )
    return value


def _guarantee(opts: Mapping[str, str], copts: ClusterOptions, store: str | None) -> str:
    raw = opts.get("delivery.guarantee")
    has_store = copts.zk_connect is not None or store is not None
    if raw is None:
        global _defaulted_logged
        chosen = EXACTLY_ONCE if has_store else AT_LEAST_ONCE
        if not _defaulted_logged:
            _defaulted_logged = True
            log.info("kafka07 sink: delivery.guarantee not set: %s (%s)", chosen,
                     "records in ZooKeeper" if store is None and has_store
                     else "records in delivery.store" if has_store
                     else "broker.list and no delivery.store: nowhere to keep records")
        return chosen
    value = raw.strip().lower()
    if value not in GUARANTEES:
        raise OptionError(
            "delivery.guarantee", f"must be {' or '.join(GUARANTEES)}, got {raw!r}"
        )
    if value == EXACTLY_ONCE and not has_store:
        raise OptionError(
            "delivery.store",
            "is required for delivery.guarantee=exactly-once with broker.list (there is no "
            "ZooKeeper to keep the write's records in): give a directory every executor "
            "shares, e.g. beside the checkpoint, or use at-least-once",
        )
    return value


def parse_delivery_options(opts: Mapping[str, str], copts: ClusterOptions) -> DeliveryOptions:
    """The delivery options from lower-cased ``opts``; OptionError for a bad one."""
    store = opts.get("delivery.store")
    if store is not None:
        store = store.strip()
        if not store:
            raise OptionError("delivery.store", "must name a directory, got an empty value")
    zk_root = _zk_root(opts.get("delivery.zk.root", defaults.DELIVERY_ZK_ROOT))
    return DeliveryOptions(
        guarantee=_guarantee(opts, copts, store),
        zk_root=zk_root,
        store=store,
        lock_timeout_ms=int_option(opts, "delivery.lock.timeout.ms",
                                   defaults.DELIVERY_LOCK_TIMEOUT_MS, 0, _MAX_MS),
        visibility_wait_ms=int_option(opts, "delivery.visibility.wait.ms",
                                      defaults.DELIVERY_VISIBILITY_WAIT_MS, 0, _MAX_MS),
    )
