"""ZooKeeperOutage: the bookkeeping of a stream's ZooKeeper outages (pure; a fake clock)."""

from __future__ import annotations

import logging

import pytest

from kafka_pyspark._spark.stream.outage import ZooKeeperOutage
from kafka_pyspark.errors import RegistryUnavailableError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


ERR = RegistryUnavailableError("ZooKeeper zk:2181: listing /brokers/ids timed out")


def test_the_bound_counts_from_the_first_failing_call() -> None:
    clock = Clock()
    o = ZooKeeperOutage("zk:2181", 5000, clock=clock)
    clock.now = 102.0
    o.failed(ERR, began=100.0, kept="x")  # 2 s into the outage
    assert o.active and o.outages == 1 and o.elapsed_ms() == 2000.0
    assert o.waiting(connected=False)  # skip calls while kazoo reconnects
    assert not o.waiting(connected=True)  # try again once it is connected
    clock.now = 104.9
    o.failed(ERR, began=104.0, kept="x")  # the same outage: its start does not move
    assert o.elapsed_ms() == pytest.approx(4900.0)
    clock.now = 105.1
    with pytest.raises(RegistryUnavailableError, match=r"zk\.outage\.max\.ms=5000") as info:
        o.waiting(connected=False)
    assert "zk:2181" in str(info.value) and "5100 ms" in str(info.value)


def test_recovery_ends_the_outage_and_a_new_one_starts_afresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    o = ZooKeeperOutage("zk:2181", 5000, clock=clock)
    caplog.set_level(logging.INFO, logger="kafka_pyspark")
    o.failed(ERR, began=99.0, kept="x")
    o.failed(ERR, began=99.5, kept="x")
    clock.now = 103.0
    o.recovered()
    assert not o.active
    clock.now = 200.0
    o.failed(ERR, began=199.0, kept="x")  # a second outage: a fresh clock
    assert o.outages == 2 and o.elapsed_ms() == 1000.0
    warned = [r for r in caplog.records if "is not answering" in r.getMessage()]
    back = [r for r in caplog.records if "answers again after 4.0 s" in r.getMessage()]
    assert len(warned) == 2 and len(back) == 1


def test_zero_fails_at_the_first_failed_call_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    o = ZooKeeperOutage("zk:2181", 0, clock=clock)
    caplog.set_level(logging.INFO, logger="kafka_pyspark")
    clock.now = 100.5
    with pytest.raises(RegistryUnavailableError, match=r"zk\.outage\.max\.ms=0") as info:
        o.failed(ERR, began=100.0, kept="x")
    assert info.value.__cause__ is ERR
    assert not [r for r in caplog.records if "is not answering" in r.getMessage()]
