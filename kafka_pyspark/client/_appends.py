"""Did the broker append what was produced? The log end before and after, per partition.

A 0.7 broker drops a produced message set holding a message over *its* ``max.message.size``
without an answer and keeps the connection open (docs/dev/PROTOCOL.md "Measured: PRODUCE"), so the
delivery barrier (an OFFSETS answer after the PRODUCEs on the same connection) still succeeds.
Offsets are byte positions, though, and OFFSETS latest answers the log end: if a producer learns the
end of each partition before its first set (on the same connection, so the answer precedes its
PRODUCEs) and again after the barrier, the log must have grown by at least the bytes it sent.

What this detects and what it cannot:

* detected: fewer bytes appended than sent, when no other producer appended to that
  partition in between (the usual case of a set dropped for its size);
* not detected: a drop covered by other producers' data appended to the same partition at the
  same time (the growth is shared);
* a broker restarted between the two answers may have cut a torn tail from its log (another
  producer's half-written set), understating the growth: the connection was re-established in
  between (``reconnected``), and the report says the shortfall may be that instead;
* a 0.7 broker reports only *flushed* bytes (``log.flush.interval`` > 1 on real brokers), so a
  short growth is re-checked until it covers what was sent or ``wait`` seconds passed; only
  then is it reported. A broker that flushes more lazily than ``wait`` is reported as short
  (a false alarm, saying so).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: first pause between re-checks of a short growth (doubling up to _MAX_PAUSE)
_FIRST_PAUSE = 0.05
_MAX_PAUSE = 1.0

Part = tuple[str, int]  # (topic, partition) on one broker


@dataclass(frozen=True)
class Shortfall:
    """A partition whose log grew by fewer bytes than were produced to it."""

    topic: str
    partition: int
    before: int
    after: int
    sent: int
    #: the connection was re-established since ``before`` was read (a broker restart?)
    reconnected: bool = False

    @property
    def grown(self) -> int:
        return self.after - self.before


class AppendLedger:
    """Per (topic, partition) of one broker connection: the log end before the first set
    since the last check, and the message-set bytes produced since."""

    def __init__(self) -> None:
        self._base: dict[Part, int] = {}
        self._sent: dict[Part, int] = {}
        self._session: dict[Part, int] = {}  # the connection's socket count at the base

    def needs_base(self, topic: str, partition: int) -> bool:
        """True when the log end must be asked before producing to this partition."""
        return partition >= 0 and (topic, partition) not in self._base

    def set_base(self, topic: str, partition: int, end: int, session: int = 0) -> None:
        self._base[(topic, partition)] = end
        self._session[(topic, partition)] = session
        self._sent.setdefault((topic, partition), 0)

    def add_sent(self, topic: str, partition: int, nbytes: int) -> None:
        if (topic, partition) in self._base:
            self._sent[(topic, partition)] += nbytes

    def parts(self) -> list[Part]:
        return [p for p, n in self._sent.items() if n]

    def check(
        self,
        latest: Callable[[str, int], int],
        *,
        known: dict[Part, int] | None = None,
        wait: float = 0.0,
        session: int = 0,
    ) -> list[Shortfall]:
        """Compare each partition's growth with what was sent to it; ``latest(topic,
        partition)`` asks the log end (after the barrier); ``known`` holds ends already
        answered (the barrier's own). Short partitions are asked again until ``wait`` seconds
        passed. ``session`` is the connection's socket count now (see ``set_base``).
        Checked partitions start afresh from their new end."""
        ends = dict(known or {})
        for part in self.parts():
            if part not in ends:
                ends[part] = latest(*part)
        deadline = time.monotonic() + wait
        pause = _FIRST_PAUSE
        while True:
            short = [p for p in self.parts() if ends[p] - self._base[p] < self._sent[p]]
            left = deadline - time.monotonic()
            if not short or left <= 0:
                break
            time.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_PAUSE)
            for part in short:
                ends[part] = latest(*part)
        out = [
            Shortfall(t, p, self._base[(t, p)], ends[(t, p)], self._sent[(t, p)],
                      reconnected=self._session.get((t, p), 0) != session)
            for t, p in short
        ]
        for part in self.parts():
            self._base[part] = ends[part]
            self._session[part] = session
            self._sent[part] = 0
        return out


__all__ = ["AppendLedger", "Shortfall"]
