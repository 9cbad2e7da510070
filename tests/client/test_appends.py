"""The producer's append check against the embedded broker: a set the broker
drops without an answer is reported; a lazily flushing broker is waited for, not reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_pyspark._messages import encode_message_set
from kafka_pyspark.client import DeliveryCount, Producer
from kafka_pyspark.errors import AppendShortfallError, DeliveryError
from kafka_pyspark.testing.broker import EmbeddedBroker


def test_a_dropped_set_is_a_shortfall_naming_the_partition(tmp_path: Path) -> None:
    ok = encode_message_set([b"a" * 100, b"b" * 50])
    big = encode_message_set([b"c" * 2000])
    with EmbeddedBroker(log_dir=tmp_path, num_partitions=2, max_message_size=1000) as b:
        addr = {0: (b.host, b.port)}
        with Producer(addr, timeout=5.0, check_appends=0.3) as p:
            p.send(0, "t", 0, ok)
            p.send(0, "t", 1, big)  # over the broker's max.message.size: dropped silently
            with pytest.raises(AppendShortfallError) as e:
                p.flush()
            assert isinstance(e.value, DeliveryError)
            assert e.value.unconfirmed == {("t", 0, 1): (1, len(big))}
            assert e.value.confirmed == {("t", 0, 0): (1, len(ok))}
            text = str(e.value)
            assert f"topic 't' broker 0 partition 1: sent {len(big)} bytes" in text
            assert "log grew by 0 bytes (log end 0 -> 0" in text
            assert "max.message.size" in text
            # the next flush starts afresh: a good set to partition 1 confirms
            p.send(0, "t", 1, ok)
            assert p.flush() == {("t", 0, 1): DeliveryCount(1, len(ok))}
        assert b.log_end("t", 0) == len(ok) and b.log_end("t", 1) == len(ok)


def test_a_lazily_flushing_broker_is_waited_for(tmp_path: Path) -> None:
    data = encode_message_set([b"x" * 300] * 3)
    # flushed every 1000 messages or after 0.3 s: OFFSETS latest lags behind the append
    with EmbeddedBroker(log_dir=tmp_path, num_partitions=1, flush_interval=1000,
                        flush_interval_ms=300) as b:
        with Producer({0: (b.host, b.port)}, timeout=5.0, check_appends=5.0) as p:
            p.send(0, "lazy", 0, data)
            assert p.flush() == {("lazy", 0, 0): DeliveryCount(1, len(data))}
        assert b.log_end("lazy", 0) == len(data)
    # without waiting, the same lag would be (wrongly) short: the wait is what prevents it
    with (
        EmbeddedBroker(log_dir=tmp_path / "2", num_partitions=1, flush_interval=1000,
                       flush_interval_ms=5000) as b2,
        Producer({0: (b2.host, b2.port)}, timeout=5.0, check_appends=0.0) as p2,
    ):
        p2.send(0, "lazy", 0, data)
        with pytest.raises(AppendShortfallError, match="waiting 0 s"):
            p2.flush()


def test_a_shortfall_across_a_reconnect_says_the_broker_may_have_restarted(
    tmp_path: Path,
) -> None:
    ok = encode_message_set([b"a" * 100])
    big = encode_message_set([b"c" * 2000])
    with EmbeddedBroker(log_dir=tmp_path, num_partitions=1, max_message_size=1000) as b:
        with Producer({0: (b.host, b.port)}, timeout=5.0, retries=5, check_appends=0.2) as p:
            p.send(0, "t", 0, ok)
            assert p.flush() == {("t", 0, 0): DeliveryCount(1, len(ok))}
            b.restart()  # the producer's next request reconnects: a new broker session
            p.send(0, "t", 0, big)  # dropped by the broker
            with pytest.raises(AppendShortfallError) as e:
                p.flush()
        text = str(e.value)
        assert f"sent {len(big)} bytes but the log grew by 0 bytes" in text
        assert "the connection was re-established in between" in text
        assert "max.message.size is smaller" not in text
        assert b.log_end("t", 0) == len(ok)
