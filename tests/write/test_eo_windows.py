"""Exactly-once windows against an in-memory store (no I/O): a window's intent is sent to the
store when the window is sealed, and its sets are sent only once that intent is confirmed, when
the next window is sealed or at the end; a failed attempt waits for an intent still in flight
before it releases its lock."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_pyspark._options.delivery_options import EXACTLY_ONCE, DeliveryOptions
from kafka_pyspark._write import delivery
from kafka_pyspark._write.delivery import ExactlyOnce
from kafka_pyspark._write.digest import SetDigest
from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.rows import Targets
from kafka_pyspark._write.store import RECORDED, Claim, PendingClaim, Recording

IDENT = TaskIdentity("sink", 4, 1)
SET = b"s" * 60  # two sets fill a window of 100 bytes


class _Confirm:
    """An intent whose store has answered (``answered``) or not: confirmed when called."""

    def __init__(self, log: list[Any], index: int, answered: bool) -> None:
        self.log, self.index, self.answered = log, index, answered

    def __call__(self) -> None:
        self.log.append(("intent confirmed", self.index))

    def ready(self) -> bool:
        return self.answered


class _Store:
    """Records every call in ``log``; an intent is confirmed when its Recording is called;
    ``answered``: whether the store has answered an intent as soon as it was sent."""

    def __init__(self, log: list[Any], answered: bool = False) -> None:
        self.log = log
        self.answered = answered

    def claim(self, ident: TaskIdentity, timeout_s: float) -> Claim:
        return Claim(None, [])

    def start_claim(self, ident: TaskIdentity, timeout_s: float) -> PendingClaim:
        return PendingClaim(lambda: self.claim(ident, timeout_s))

    def holds(self) -> bool:
        return True

    def verify(self, ident: TaskIdentity) -> bool:
        return True

    def start_intent(self, ident: TaskIdentity, index: int, data: bytes) -> Recording:
        self.log.append(("intent sent", index))
        return _Confirm(self.log, index, self.answered)

    def release(self, ident: TaskIdentity) -> None:
        self.log.append("released")


class _Producer:
    def log_end(self, broker: int, topic: str, partition: int) -> int:
        return 0


def _once(log: list[Any], send: Any, answered: bool = False) -> ExactlyOnce:
    targets = Targets()
    targets.id(("t", 0, 0))
    once = ExactlyOnce(_Store(log, answered), IDENT, DeliveryOptions(guarantee=EXACTLY_ONCE),  # type: ignore[arg-type]
                       targets, send, _Producer, lambda *a: None, 1 << 20)  # type: ignore[arg-type]
    assert once.begin() is None
    return once


def _add(once: ExactlyOnce, n: int) -> None:
    for i in range(n):
        once.add([0], [SET], [1], [SetDigest(1, len(SET), i)])


def test_a_window_is_sent_after_its_intent_while_the_next_one_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(delivery, "WINDOW_BYTES", 100)
    log: list[Any] = []
    once = _once(log, lambda targets, sets, counts: log.extend(["set"] * len(sets)))
    _add(once, 2)
    assert log == [("intent sent", 0)]  # sealed: its intent on its way, nothing sent
    _add(once, 2)
    assert log == [("intent sent", 0), ("intent sent", 1), ("intent confirmed", 0), "set", "set"]
    once.end_of_input()
    assert log[5:] == [("intent confirmed", 1), "set", "set"]
    assert once.records() == ("4/1/intent-00000", "4/1/intent-00001")


def test_a_window_whose_intent_is_answered_goes_at_the_next_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store answered while the task encoded: the sealed window is sent with the next sets
    added, not held until the next window is sealed."""
    monkeypatch.setattr(delivery, "WINDOW_BYTES", 100)
    log: list[Any] = []
    once = _once(log, lambda targets, sets, counts: log.extend(["set"] * len(sets)),
                 answered=True)
    _add(once, 2)  # the second set seals window 0: it goes at once
    assert log == [("intent sent", 0), ("intent confirmed", 0), "set", "set"]
    _add(once, 1)  # buffered in window 1
    assert log[4:] == []
    once.end_of_input()
    assert log[4:] == [("intent sent", 1), ("intent confirmed", 1), "set"]


def test_a_failed_send_still_waits_for_the_intent_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(delivery, "WINDOW_BYTES", 100)
    log: list[Any] = []

    def broken(targets: list[int], sets: list[bytes], counts: list[int]) -> None:
        raise ConnectionError("broker gone")

    once = _once(log, broken)
    _add(once, 2)
    with pytest.raises(ConnectionError):
        _add(once, 2)  # window 1 sealed (its intent sent), then sending window 0 fails
    once.close()
    assert log == [("intent sent", 0), ("intent sent", 1), ("intent confirmed", 0),
                   ("intent confirmed", 1), "released"]


class _Recording(_Store):
    """Keeps each intent record's bytes."""

    def __init__(self) -> None:
        super().__init__([])
        self.intents: list[bytes] = []

    def start_intent(self, ident: TaskIdentity, index: int, data: bytes) -> Recording:
        self.intents.append(data)
        return RECORDED


def _intents(sets: list[tuple[int, bytes]], together: bool) -> list[bytes]:
    """The intent records of ``sets`` (target, data) added in one call or one at a time."""
    store = _Recording()
    targets = Targets()
    for p in range(4):
        targets.id(("t" * (1 + 60 * p), 0, p))  # topics of different lengths
    once = ExactlyOnce(store, IDENT, DeliveryOptions(guarantee=EXACTLY_ONCE),  # type: ignore[arg-type]
                       targets, lambda *a: None, _Producer, lambda *a: None, 1 << 20)  # type: ignore[arg-type]
    assert once.begin() is None
    digests = [SetDigest(1, len(d), i) for i, (_, d) in enumerate(sets)]
    ids: list[int] = [t for t, _ in sets]
    datas: list[bytes | memoryview] = [d for _, d in sets]
    if together:
        once.add(ids, datas, [1] * len(sets), digests)
    else:
        for t, d, digest in zip(ids, datas, digests, strict=True):
            once.add([t], [d], [1], [digest])
    once.end_of_input()
    return store.intents


@pytest.mark.parametrize(("window_bytes", "record_bytes"), [(100, 1 << 20), (1 << 30, 700),
                                                            (250, 400)])
def test_sets_added_together_make_the_windows_of_sets_added_one_by_one(
    monkeypatch: pytest.MonkeyPatch, window_bytes: int, record_bytes: int
) -> None:
    """Windows close at the set that fills them (bytes or record), however sets arrive."""
    monkeypatch.setattr(delivery, "WINDOW_BYTES", window_bytes)
    monkeypatch.setattr(delivery, "WINDOW_RECORD_BYTES", record_bytes)
    sets = [((i * 7) % 4, b"s" * (10 + (i * 13) % 70)) for i in range(120)]
    one_by_one = _intents(sets, together=False)
    assert len(one_by_one) > 3
    assert _intents(sets, together=True) == one_by_one
