"""Exactly-once writing driven through ``TaskWriter`` without Spark: real ZooKeeper, embedded
brokers, a first attempt SIGKILLed at a fault point in a subprocess, the retry in this process,
every value counted by an independent read of the topic."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from _cluster import count_values, read_topic
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_pyspark._spark.write import build_plan
from kafka_pyspark._write import TaskWriter
from kafka_pyspark._write import task as task_module
from kafka_pyspark._write.file_store import FileStore
from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.store import Claim, PendingClaim, ZkStore
from kafka_pyspark.errors import DeliveryLockError, NonDeterministicInputError, OptionError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk

SCHEMA = StructType([StructField("value", BinaryType(), True)])
IDENT = TaskIdentity("query-1", 7, 3)
N = 200


def values(n: int = N, tag: str = "v") -> list[bytes]:
    return [f"{tag}{i:05d}".encode() for i in range(n)]


def batches(vals: list[bytes]) -> Iterator[pa.RecordBatch]:
    for i in range(0, len(vals), 64):
        yield pa.RecordBatch.from_arrays([pa.array(vals[i:i + 64], pa.binary())], ["value"])


def options(cluster: dict[str, str], **more: str) -> dict[str, str]:
    return {"topic": "eo", "batch.size": "10", "delivery.visibility.wait.ms": "500", **cluster,
            **more}


_ATTEMPT = """
import sys, pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType
from kafka_pyspark._write import TaskWriter
from kafka_pyspark._spark.write import build_plan
from kafka_pyspark._write.identity import TaskIdentity
opts = dict(a.split("=", 1) for a in sys.argv[2:])
vals = [f"{sys.argv[1]}{i:05d}".encode() for i in range(200)]
plan = build_plan(opts, StructType([StructField("value", BinaryType(), True)]))
batch = pa.RecordBatch.from_arrays([pa.array(vals, pa.binary())], ["value"])
TaskWriter(plan, identity=TaskIdentity("query-1", 7, 3)).write([batch])
"""


def killed_attempt(opts: dict[str, str], point: str, fault_dir: Path, tag: str = "v") -> None:
    """A first attempt in a subprocess, SIGKILLed at ``point``."""
    env = {**os.environ, "KAFKA_PYSPARK_FAULT": point, "KAFKA_PYSPARK_FAULT_DIR": str(fault_dir)}
    out = subprocess.run([sys.executable, "-c", _ATTEMPT, tag,
                          *(f"{k}={v}" for k, v in opts.items())],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == -9, out.stderr
    assert (fault_dir / f"{point}.fired").exists()


def written_once(brokers: list[EmbeddedBroker], expected: list[bytes]) -> None:
    got = count_values(read_topic(brokers, "eo"))
    assert got == Counter(expected)


@pytest.mark.parametrize("point", ["after-intent", "mid-send", "after-send"])
def test_retry_after_a_kill_appends_only_the_rest(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, point: str
) -> None:
    opts = options({"zk.connect": zk_connect})
    killed_attempt(opts, point, tmp_path)
    # another producer appends to the same broker-partitions before the retry reads back
    other = options({"zk.connect": zk_connect, "delivery.guarantee": "at-least-once"})
    TaskWriter(build_plan(other, SCHEMA)).write(batches(values(30, "o")))
    msg = TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()))
    written_once(brokers, values() + values(30, "o"))
    assert msg.rows == N and msg.messages == N and msg.sink == ("query-1", 7)
    # done: a whole re-run sends nothing and answers the same commit message
    again = TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()))
    assert (again.rows, again.written, again.sink) == (msg.rows, msg.written, msg.sink)
    written_once(brokers, values() + values(30, "o"))


def test_a_rerun_after_done_is_a_no_op(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, kz: KazooClient
) -> None:
    opts = options({"zk.connect": zk_connect, "compression.codec": "gzip"})
    killed_attempt(opts, "after-done", tmp_path)
    msg = TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()))
    assert msg.messages == N and msg.rows == N
    written_once(brokers, values())
    base = "/kafka_pyspark/sinks/query-1/7/3"
    assert sorted(kz.get_children(base)) == ["done", "intent-00000"]  # the lock is gone
    # this attempt found the task done: it cannot name the records (the driver lists them)
    assert msg.records is None


def test_the_report_names_the_records_and_the_driver_deletes_them(
    brokers: list[EmbeddedBroker], zk_connect: str, kz: KazooClient
) -> None:
    opts = options({"zk.connect": zk_connect})
    plan = build_plan(opts, SCHEMA)
    msg = TaskWriter(plan, identity=IDENT).write(batches(values()))
    assert msg.records == ("7/3/intent-00000", "7/3/done")
    base = "/kafka_pyspark/sinks/query-1"
    other = TaskIdentity("query-1", 7, 4)  # a zombie's lock the reports do not name
    zombie = ZkStore(plan.cluster, plan.options.delivery.zk_root)
    assert zombie.claim(other, 1.0).done is None
    store = ZkStore(plan.cluster, plan.options.delivery.zk_root)
    store.forget_records("query-1", msg.records)  # the node left makes it list and retry
    assert kz.exists(f"{base}/7/3") is None and kz.exists(f"{base}/7/4/lock") is None
    zombie.release(other)
    msg = TaskWriter(plan, identity=IDENT).write(batches(values()))
    store.forget_records("query-1", msg.records or ())  # named: all of it in one round
    assert kz.exists(base) is None


def test_other_rows_on_a_retry_are_named(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path
) -> None:
    opts = options({"zk.connect": zk_connect})
    killed_attempt(opts, "after-intent", tmp_path)
    with pytest.raises(NonDeterministicInputError,
                       match=r"sink query-1 batch 7 partition 3: for topic 'eo' broker-partition"):
        TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values(tag="w")))
    assert count_values(read_topic(brokers, "eo")) == Counter()


def test_fewer_rows_on_a_retry_are_named(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path
) -> None:
    opts = options({"zk.connect": zk_connect, "partitioner": "random"})
    killed_attempt(opts, "after-intent", tmp_path)
    with pytest.raises(NonDeterministicInputError, match="the earlier attempt recorded"):
        TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()[:150]))


def test_a_second_attempt_waits_for_the_lock(
    brokers: list[EmbeddedBroker], zk_connect: str
) -> None:
    opts = options({"zk.connect": zk_connect, "delivery.lock.timeout.ms": "300"})
    plan = build_plan(opts, SCHEMA)
    holder = ZkStore(plan.cluster, plan.options.delivery.zk_root)
    assert holder.claim(IDENT, 1.0).done is None
    with pytest.raises(DeliveryLockError, match=r"delivery\.lock\.timeout\.ms"):
        TaskWriter(plan, identity=IDENT).write(batches(values()))
    # released while the second waits: it goes on and writes everything once
    patient = build_plan({**opts, "delivery.lock.timeout.ms": "20000"}, SCHEMA)
    threading.Timer(0.5, holder.release, args=(IDENT,)).start()
    started = time.monotonic()
    msg = TaskWriter(patient, identity=IDENT).write(batches(values()))
    assert time.monotonic() - started >= 0.4
    assert msg.messages == N
    written_once(brokers, values())


def test_file_store_with_broker_list(tmp_path: Path, bare_broker: EmbeddedBroker) -> None:
    store = tmp_path / "eo-store"
    opts = options({"broker.list": f"0:127.0.0.1:{bare_broker.port}",
                    "delivery.store": str(store)})
    killed_attempt(opts, "mid-send", tmp_path)
    msg = TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()))
    assert msg.messages == N
    written_once([bare_broker], values())
    assert sorted(os.listdir(store / "query-1" / "7" / "3")) == ["done", "intent-00000"]
    again = TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()))
    assert again.written == msg.written
    written_once([bare_broker], values())
    assert sorted(os.listdir(store / "query-1" / "7" / "3")) == ["done", "intent-00000"]
    FileStore(str(store)).forget("query-1", below=8)
    assert os.listdir(store / "query-1") == []


def test_exactly_once_without_a_store_names_the_option(bare_broker: EmbeddedBroker) -> None:
    with pytest.raises(OptionError, match=r"delivery\.store"):
        build_plan(options({"broker.list": f"0:127.0.0.1:{bare_broker.port}",
                            "delivery.guarantee": "exactly-once"}), SCHEMA)


def test_a_task_without_rows_writes_no_records(
    brokers: list[EmbeddedBroker], zk_connect: str, kz: KazooClient
) -> None:
    plan = build_plan(options({"zk.connect": zk_connect}), SCHEMA)
    empty = pa.RecordBatch.from_arrays([pa.array([], pa.binary())], ["value"])
    msg = TaskWriter(plan, identity=IDENT).write([empty])
    assert (msg.rows, msg.written, msg.sink) == (0, {}, ("query-1", 7))
    assert kz.exists("/kafka_pyspark") is None


@pytest.mark.parametrize(("wait_ms", "twice"), [(6000, 0), (0, 10)])
def test_a_retry_waits_for_unflushed_sets(
    tmp_path: Path, zk_connect: str, kz: KazooClient, wait_ms: int, twice: int
) -> None:
    """A broker flushing every 2 s serves the killed attempt's first set only once flushed. The
    dead attempt's lock is deleted at once (as if its session had expired at once), so the retry
    reads back before the flush: it polls up to ``delivery.visibility.wait.ms`` and finds the
    set; without the wait it sends that set (10 messages) again, so the wait is what counts."""
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with EmbeddedBroker(broker_id=0, log_dir=tmp_path / "lazy", zk_connect=zk_connect,
                        num_partitions=1, flush_interval=1_000_000,
                        flush_interval_ms=2000) as lazy:
        opts = options({"zk.connect": zk_connect, "delivery.visibility.wait.ms": str(wait_ms)})
        killed_attempt(opts, "mid-send", tmp_path)
        kz.delete("/kafka_pyspark/sinks/query-1/7/3/lock")
        msg = TaskWriter(build_plan(opts, SCHEMA), identity=IDENT).write(batches(values()))
        assert msg.messages == N
        deadline = time.monotonic() + 10  # everything flushed, for the reader
        while sum(count_values(read_topic([lazy], "eo")).values()) < N + twice:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        got = count_values(read_topic([lazy], "eo"))
    assert set(got) == set(values()) and sum(got.values()) == N + twice


def slow_claims(monkeypatch: pytest.MonkeyPatch, log: list[str]) -> None:
    """ZkStore.start_claim whose answer reads as not ready until it is waited for (a store
    slow to answer), logging the answer in ``log``."""
    real = ZkStore.start_claim

    def start_claim(store: ZkStore, ident: TaskIdentity, timeout_s: float) -> PendingClaim:
        pending = real(store, ident, timeout_s)

        def finish() -> Claim:
            claim = pending()
            log.append("claimed")
            return claim

        return PendingClaim(finish, lambda: False)

    monkeypatch.setattr(ZkStore, "start_claim", start_claim)


def logged(log: list[str], vals: list[bytes], fail_at: int | None = None
           ) -> Iterator[pa.RecordBatch]:
    """:func:`batches`, logging each as it is read (and raising at batch ``fail_at``)."""
    for i, batch in enumerate(batches(vals)):
        if i == fail_at:
            raise RuntimeError("the input failed")
        log.append(f"batch {i}")
        yield batch


@pytest.mark.parametrize("n", [N, 70])
def test_input_is_read_ahead_while_the_claim_is_answered(
    brokers: list[EmbeddedBroker], zk_connect: str, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """Batches are read (not routed) while the store answers the claim, up to
    CLAIM_AHEAD_BYTES (here: 3 batches' worth) or the end of the input; then written once."""
    log: list[str] = []
    slow_claims(monkeypatch, log)
    first = next(batches(values()))
    monkeypatch.setattr(task_module, "CLAIM_AHEAD_BYTES", 3 * first.nbytes)
    routed = task_module.TaskWriter._add

    def add(writer: TaskWriter, batch: pa.RecordBatch) -> None:
        log.append("routed")
        routed(writer, batch)

    monkeypatch.setattr(task_module.TaskWriter, "_add", add)
    plan = build_plan(options({"zk.connect": zk_connect}), SCHEMA)
    msg = TaskWriter(plan, identity=IDENT).write(logged(log, values(n)))
    ahead = ["batch 0", "batch 1", "batch 2"][: -(-n // 64)]
    assert log[: 2 * len(ahead) + 1] == [*ahead, "claimed", *["routed"] * len(ahead)]
    assert msg.messages == n
    written_once(brokers, values(n))


def test_a_failure_while_reading_ahead_releases_the_lock(
    brokers: list[EmbeddedBroker], zk_connect: str, monkeypatch: pytest.MonkeyPatch,
    kz: KazooClient,
) -> None:
    log: list[str] = []
    slow_claims(monkeypatch, log)
    plan = build_plan(options({"zk.connect": zk_connect}), SCHEMA)
    with pytest.raises(RuntimeError, match="the input failed"):
        TaskWriter(plan, identity=IDENT).write(logged(log, values(), fail_at=2))
    assert log == ["batch 0", "batch 1", "claimed"]
    assert kz.exists("/kafka_pyspark/sinks/query-1/7/3/lock") is None
    assert count_values(read_topic(brokers, "eo")) == Counter()
    # the retry claims at once (delivery.lock.timeout.ms is short) and writes everything once
    quick = build_plan(options({"zk.connect": zk_connect, "delivery.lock.timeout.ms": "300"}),
                       SCHEMA)
    assert TaskWriter(quick, identity=IDENT).write(batches(values())).messages == N
    written_once(brokers, values())
