"""``delivery.*`` options: the guarantee's default follows the store, mistakes name the option."""

from __future__ import annotations

import pytest

from kafka_pyspark._options import parse_write_options
from kafka_pyspark._options.delivery_options import DeliveryOptions
from kafka_pyspark.errors import OptionError

ZK = {"zk.connect": "127.0.0.1:2181/kafka", "topic": "t"}
BL = {"broker.list": "0:127.0.0.1:9092", "topic": "t"}


def delivery(**opts: str) -> DeliveryOptions:
    return parse_write_options(opts)[0].delivery


def test_default_is_exactly_once_with_a_store() -> None:
    assert delivery(**ZK) == DeliveryOptions(guarantee="exactly-once")
    assert delivery(**BL, **{"delivery.store": " /shared/eo "}) == DeliveryOptions(
        guarantee="exactly-once", store="/shared/eo")


def test_default_is_at_least_once_without_a_store() -> None:
    assert delivery(**BL).guarantee == "at-least-once"
    assert not delivery(**BL).exactly_once


def test_explicit_values() -> None:
    got = delivery(**ZK, **{"DELIVERY.GUARANTEE": "At-Least-Once",
                            "delivery.zk.root": "/eo/sinks",
                            "delivery.lock.timeout.ms": "5000",
                            "delivery.visibility.wait.ms": "0"})
    assert got == DeliveryOptions(guarantee="at-least-once", zk_root="/eo/sinks",
                                  lock_timeout_ms=5000, visibility_wait_ms=0)


def test_exactly_once_without_a_store_names_delivery_store() -> None:
    with pytest.raises(OptionError, match=r"delivery\.store.*broker\.list"):
        delivery(**BL, **{"delivery.guarantee": "exactly-once"})


@pytest.mark.parametrize(("name", "value", "match"), [
    ("delivery.guarantee", "exactly_once", "exactly-once or at-least-once"),
    ("delivery.zk.root", "sinks", "absolute ZooKeeper path"),
    ("delivery.zk.root", "/sinks/", "absolute ZooKeeper path"),
    ("delivery.store", "  ", "directory"),
    ("delivery.lock.timeout.ms", "-1", "between"),
    ("delivery.visibility.wait.ms", "soon", "integer"),
])
def test_bad_values_name_the_option(name: str, value: str, match: str) -> None:
    with pytest.raises(OptionError, match=match) as e:
        delivery(**ZK, **{name: value})
    assert name in str(e.value)
