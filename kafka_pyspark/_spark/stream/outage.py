"""A stream's view of a ZooKeeper outage: keep going on what was last seen, for a bounded time.

Between topology changes a stream's data path needs no ZooKeeper: the brokers' addresses and
the broker-partitions were listed before, and every read goes to the brokers. So when a
registry call fails with :class:`~kafka_pyspark.errors.RegistryUnavailableError` (ZooKeeper
stopped, hung, unreachable), the stream reader asks :class:`ZooKeeperOutage` what to do:

- the first failure starts an **outage** and logs one warning (what is kept, what is deferred,
  the bound); later failures of the same outage log nothing more;
- while the outage lasts, the reader plans micro-batches on the last known brokers and
  broker-partitions and defers group commits; :meth:`ZooKeeperOutage.waiting` tells it to skip
  a registry call that can only time out (kazoo is still reconnecting in the background), so a
  micro-batch does not wait a ZooKeeper timeout each time;
- the first registry call that succeeds ends the outage (one info line with its length);
- an outage that lasts longer than ``zk.outage.max.ms`` fails the query with a
  :class:`~kafka_pyspark.errors.RegistryUnavailableError` naming ZooKeeper, the time and the
  option. ``0`` fails at the first failed call (no outage is tolerated).

The clock starts when the first failing call began (it failed only after its own timeout).
Pure bookkeeping: the clock and the log are the only side effects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kafka_pyspark.errors import RegistryUnavailableError

__all__ = ["OUTAGE_OPTION", "ZooKeeperOutage"]

log = logging.getLogger("kafka_pyspark._spark.stream.reader")

OUTAGE_OPTION = "zk.outage.max.ms"


class ZooKeeperOutage:
    """Bookkeeping of one stream's ZooKeeper outages (see the module docstring)."""

    def __init__(
        self,
        zk_connect: str,
        max_ms: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.zk_connect = zk_connect
        self.max_ms = max_ms
        self._clock = clock
        self.since: float | None = None  # when the first failing call of this outage began
        self.outages = 0  # how many outages this reader lived through (tests, debugging)

    @property
    def active(self) -> bool:
        return self.since is not None

    def elapsed_ms(self) -> float:
        return 0.0 if self.since is None else (self._clock() - self.since) * 1000.0

    def failed(self, error: RegistryUnavailableError, began: float, kept: str) -> None:
        """A registry call that began at ``began`` (``clock()`` time) failed with ``error``.

        Starts the outage (warning once; ``kept`` says what the stream goes on with) or
        continues it; raises past the bound."""
        if self.since is None:
            self.since = began
            self.outages += 1
            if self.max_ms > 0:
                log.warning(
                    "kafka07 stream: ZooKeeper %s is not answering (%s). Streaming goes on with "
                    "%s; group commits wait until it is back (the newest offsets are written "
                    "then). The query fails if ZooKeeper stays away longer than %s=%d ms.",
                    self.zk_connect, error, kept, OUTAGE_OPTION, self.max_ms,
                )
        self.check(error)

    def check(self, cause: BaseException | None = None) -> None:
        """Raise if the current outage has lasted longer than the bound."""
        elapsed = self.elapsed_ms()
        if self.since is not None and elapsed > self.max_ms:
            raise RegistryUnavailableError(
                f"ZooKeeper {self.zk_connect} has not answered for {elapsed:.0f} ms, longer "
                f"than {OUTAGE_OPTION}={self.max_ms}: the stream stops rather than go on "
                "without seeing topology changes (the checkpoint resumes it exactly)"
                + (f"; last error: {cause}" if cause is not None else "")
            ) from cause

    def waiting(self, connected: bool) -> bool:
        """During an outage, while the registry is still reconnecting (``connected`` False):
        True, meaning skip the call (it could only time out); raises past the bound."""
        if self.since is None or connected:
            return False
        self.check()
        return True

    def recovered(self) -> None:
        """A registry call succeeded: the outage (if any) is over."""
        if self.since is not None:
            log.info(
                "kafka07 stream: ZooKeeper %s answers again after %.1f s; topology and group "
                "commits are current again", self.zk_connect, self.elapsed_ms() / 1000.0,
            )
            self.since = None
