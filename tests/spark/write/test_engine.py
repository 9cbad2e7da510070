"""The write engine (``TaskWriter``) driven directly, without Spark: real ZooKeeper and
embedded brokers, real sockets. Covers what is awkward to provoke through Spark: a broker
stopped in the middle of a task and the task run again (what Spark's retry does), message-set
splitting, the error commit message, the driver's commit/abort reports."""

from __future__ import annotations

import logging
import os
import pickle
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pytest
from _cluster import read_topic
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from kafka_pyspark._cluster import BrokerAddress, parse_cluster_options
from kafka_pyspark._spark.write import Kafka07CommitMessage, abort_job, build_plan, commit_job
from kafka_pyspark._write import TaskWriter, WritePlan
from kafka_pyspark._write.route import RandomRuns
from kafka_pyspark.errors import (
    AppendShortfallError,
    BrokerConnectionError,
    DeliveryError,
    InvalidPartitionError,
    MessageTooLargeError,
    SchemaError,
)

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = pytest.mark.zk

VALUE = StructType([StructField("value", BinaryType(), True)])
KEY_VALUE = StructType(
    [StructField("key", StringType(), True), StructField("value", BinaryType(), True)]
)


def plan(zk: str, schema: StructType = VALUE, **opts: str) -> WritePlan:
    return build_plan({"zk.connect": zk, **{k.replace("_", "."): v for k, v in opts.items()}},
                      schema)


def batches(values: Sequence[bytes], keys: Sequence[str | None] | None = None,
            size: int = 1000) -> Iterator[pa.RecordBatch]:
    for i in range(0, len(values), size):
        cols = [pa.array(values[i : i + size], pa.binary())]
        names = ["value"]
        if keys is not None:
            cols.insert(0, pa.array(keys[i : i + size], pa.string()))
            names.insert(0, "key")
        yield pa.record_batch(cols, names=names)


EXPLICIT = StructType(
    [
        StructField("broker", IntegerType(), True),
        StructField("partition", IntegerType(), True),
        StructField("value", BinaryType(), True),
    ]
)


def create_topic(zk: str, brokers: Sequence[EmbeddedBroker], topic: str) -> None:
    """Write one message to partition 0 of every broker and wait until they registered it."""
    ids = [b.broker_id for b in brokers]
    batch = pa.record_batch(
        [pa.array(ids, pa.int32()), pa.array([0] * len(ids), pa.int32()),
         pa.array([b"seed"] * len(ids), pa.binary())],
        names=["broker", "partition", "value"],
    )
    result = TaskWriter(plan(zk, EXPLICIT, topic=topic)).write([batch])
    assert result.error is None
    for b in brokers:
        b.wait_for_topic(topic)


def wrapper_payloads(broker: EmbeddedBroker, topic: str, partition: int) -> list[int]:
    """Payload size of every outer (wrapper) message in a partition."""
    from kafka_pyspark.client import BrokerConnection, iter_range, latest

    sizes: dict[int, int] = {}
    with BrokerConnection(broker.host, broker.port, timeout=10.0) as conn:
        end = latest(conn, topic, partition)
        for r in iter_range(conn, topic, partition, 0, end):
            offs = r.batch.column("offset").to_pylist()
            nxt = r.batch.column("next_offset").to_pylist()
            for o, n in zip(offs, nxt, strict=True):
                sizes[o] = n - o - 10  # int32 length + magic + attributes + crc
    return [sizes[o] for o in sorted(sizes)]


def test_round_trip_counts_and_key_stickiness(
    brokers: list[EmbeddedBroker], zk_connect: str
) -> None:
    keys = [f"user-{i % 101}" for i in range(5000)]
    values = [f"{k}:{i}".encode() for i, k in enumerate(keys)]
    result = TaskWriter(plan(zk_connect, KEY_VALUE, topic="eng", batch_size="64",
                             compression_codec="snappy")).write(batches(values, keys, 777))
    assert result.error is None and result.rows == 5000
    found = read_topic(brokers, "eng")
    assert Counter(v for vals in found.values() for v in vals) == Counter(values)
    assert {t: m for t, (m, _, _) in result.written.items()} == {
        ("eng", b, p): len(v) for (b, p), v in found.items()
    }
    home: dict[bytes, set[tuple[int, int]]] = {}
    for bp, vals in found.items():
        for v in vals:
            home.setdefault(v.split(b":")[0], set()).add(bp)
    assert all(len(s) == 1 for s in home.values())


def test_keyless_rows_go_in_runs_of_batch_size(broker: EmbeddedBroker, zk_connect: str) -> None:
    create_topic(zk_connect, [broker], "runs")
    values = [str(i).encode() for i in range(1000)]
    result = TaskWriter(plan(zk_connect, topic="runs", batch_size="100")).write(
        batches(values, size=64)
    )
    assert sum(s for _, _, s in result.written.values()) == 10
    found = read_topic([broker], "runs")
    got = [v for vals in found.values() for v in vals if v != b"seed"]
    assert Counter(got) == Counter(values)
    for vals in found.values():
        rest = [int(v) for v in vals if v != b"seed"]
        assert len(rest) % 100 == 0
        for j in range(0, len(rest), 100):  # each set is 100 consecutive input rows
            assert rest[j : j + 100] == list(range(rest[j], rest[j] + 100))


def test_null_keys_go_in_runs_of_batch_size_across_batches(
    broker: EmbeddedBroker, zk_connect: str
) -> None:
    # the same random routing as keyless rows: a run of batch.size null-key rows continues
    # across Arrow batches (a run restarted per batch would mix rows of distant batches in a set)
    create_topic(zk_connect, [broker], "nullruns")
    values = [str(i).encode() for i in range(1000)]
    result = TaskWriter(plan(zk_connect, KEY_VALUE, topic="nullruns", batch_size="100")).write(
        batches(values, keys=[None] * 1000, size=64)
    )
    assert result.error is None
    assert sum(s for _, _, s in result.written.values()) == 10
    found = read_topic([broker], "nullruns")
    assert Counter(v for vals in found.values() for v in vals if v != b"seed") == Counter(values)
    for vals in found.values():
        rest = [int(v) for v in vals if v != b"seed"]
        assert len(rest) % 100 == 0
        for j in range(0, len(rest), 100):  # each set is 100 consecutive input rows
            assert rest[j : j + 100] == list(range(rest[j], rest[j] + 100))


def test_random_runs_continue_across_calls() -> None:
    ids = np.array([10, 11, 12], dtype=np.int64)
    runs = RandomRuns(ids, 4, np.random.default_rng(3))
    got = np.concatenate([runs.take(n) for n in (3, 0, 6, 1, 2)])
    assert len(got) == 12 and set(got.tolist()) <= {10, 11, 12}
    for j in range(0, 12, 4):  # runs of 4 whatever the call sizes
        assert len(set(got[j : j + 4].tolist())) == 1


def test_random_runs_as_runs_do_not_depend_on_the_calls() -> None:
    # the same rows whatever the calls' sizes; each call's runs are maximal (neighbours differ)
    ids = np.array([10, 11, 12], dtype=np.int64)
    whole = RandomRuns(ids, 4, np.random.default_rng(5)).take_runs(40)
    per_row = np.repeat(whole[0], np.diff(whole[1]))
    runs = RandomRuns(ids, 4, np.random.default_rng(5))
    parts = []
    for n in (3, 0, 6, 1, 2, 17, 11):
        targets, bounds = runs.take_runs(n)
        assert bounds[0] == 0 and bounds[-1] == n and len(bounds) == len(targets) + 1
        assert (targets[1:] != targets[:-1]).all() and (np.diff(bounds) > 0).all()
        parts.append(np.repeat(targets, np.diff(bounds)))
    assert np.concatenate(parts).tolist() == per_row.tolist()
    for j in range(0, 40, 4):  # runs of 4 whatever the call sizes
        assert len(set(per_row[j : j + 4].tolist())) == 1


def test_the_plan_carries_the_parsed_cluster_options(broker: EmbeddedBroker) -> None:
    options = {"broker.list": broker.broker_list_entry, "topic": "carried",
               "socket.timeout.ms": "4321"}
    p = build_plan(options, VALUE)
    assert p.cluster == parse_cluster_options(options)
    assert p.cluster.broker_list == (BrokerAddress(0, broker.host, broker.port),)
    assert pickle.loads(pickle.dumps(p)) == p  # what Spark ships to the write tasks
    result = TaskWriter(p).write(batches([b"a", b"b"]))
    assert result.error is None and result.messages == 2


@pytest.mark.parametrize("buffersize", [None, 4096, 4 << 20])
def test_the_task_sockets_buffer_the_write_default_or_more(
    broker: EmbeddedBroker, buffersize: int | None
) -> None:
    """The producer's socket buffers are 256 KiB (measured: less CPU per row than buffers of a
    whole 1 MB request), whatever smaller ``socket.buffersize`` is set; a larger one is kept."""
    options = {"broker.list": broker.broker_list_entry, "topic": "buffers"}
    if buffersize is not None:
        options["socket.buffersize"] = str(buffersize)
    writer = TaskWriter(build_plan(options, VALUE))
    try:
        size = writer._producer().connection(0).buffer_size
        assert size == (4 << 20 if buffersize == 4 << 20 else 256 * 1024)
        # 3 MB, in requests larger than the buffer
        assert writer.write(batches([b"a" * 3000] * 1000)).messages == 1000
    finally:
        writer.close()


def test_compressed_set_split_to_fit_max_message_size(
    broker: EmbeddedBroker, zk_connect: str
) -> None:
    values = [os.urandom(300) for _ in range(400)]  # incompressible
    result = TaskWriter(plan(zk_connect, topic="split", compression_codec="gzip",
                             max_message_size="10000")).write(batches(values))
    assert result.error is None
    found = read_topic([broker], "split")
    assert Counter(v for vals in found.values() for v in vals) == Counter(values)
    sizes = [s for p in range(2) for s in wrapper_payloads(broker, "split", p)]
    assert max(sizes) <= 10000
    assert len(sizes) == sum(s for _, _, s in result.written.values()) > 2


def test_single_message_wrapper_too_large(broker: EmbeddedBroker, zk_connect: str) -> None:
    values = [b"a" * 50] * 300 + [os.urandom(2000)] + [b"z"] * 10
    p = plan(zk_connect, topic="toolarge", compression_codec="snappy", max_message_size="1500")
    result = TaskWriter(p, task="task 9").write(batches(values, size=100))
    assert result.error_type == "MessageTooLargeError"
    assert "row 300 of task 9" in (result.error or "")
    assert "max.message.size (1500)" in (result.error or "")
    # everything before the bad row's batch was written, confirmed and reported
    found = read_topic([broker], "toolarge")
    stored = sum(len(v) for v in found.values())
    assert stored == result.messages and stored >= 200
    with pytest.raises(MessageTooLargeError, match="row 300 of task 9") as e:
        commit_job([result, Kafka07CommitMessage(task="other", rows=0)], "write")
    assert f"{stored} messages" in str(e.value)


def test_uncompressed_oversize_names_row_and_key(broker: EmbeddedBroker, zk_connect: str) -> None:
    keys = ["a", "b", "the-big-one"]
    values = [b"1", b"2", b"x" * 2001]
    result = TaskWriter(plan(zk_connect, KEY_VALUE, topic="big", max_message_size="2000"),
                        task="t").write(batches(values, keys))
    assert result.error_type == "MessageTooLargeError"
    assert "row 2 of t (key 'the-big-one')" in (result.error or "")
    assert result.messages == 0
    assert broker.topics() == []  # the bad batch sent nothing


def test_null_value_and_min_value_key(brokers: list[EmbeddedBroker], zk_connect: str) -> None:
    batch = pa.record_batch([pa.array([b"ok", None], pa.binary())], names=["value"])
    result = TaskWriter(plan(zk_connect, topic="nulls")).write([batch])
    assert result.error_type == "SchemaError" and "value is null" in (result.error or "")
    with pytest.raises(SchemaError, match="value is null"):
        commit_job([result], "write")
    # a new topic on two brokers: 2 partitions, MIN_VALUE % 2 == 0 -> fine
    ok = TaskWriter(plan(zk_connect, KEY_VALUE, topic="mv")).write(
        batches([b"v"], ["polygenelubricants"]))
    assert ok.error is None and ok.written == {("mv", 0, 0): (1, ok.bytes, 1)}
    create_topic(zk_connect, brokers, "mv")
    # registered: 5 partitions -> -(2**31 % 5) = -3: 0.7's producer refuses the key
    bad = TaskWriter(plan(zk_connect, KEY_VALUE, topic="mv")).write(
        batches([b"v"], ["polygenelubricants"]))
    assert bad.error_type == "InvalidPartitionError"
    with pytest.raises(InvalidPartitionError, match=r"Integer\.MIN_VALUE"):
        commit_job([bad], "write")


def test_broker_unreachable_before_any_data(broker: EmbeddedBroker, zk_connect: str) -> None:
    p = plan(zk_connect, topic="down")
    broker.stop()
    try:
        with pytest.raises(BrokerConnectionError, match="nothing was sent"):
            TaskWriter(p).write(batches([b"v"] * 10))
    finally:
        broker.restart()


def test_broker_stopped_mid_write_then_task_retried(
    brokers: list[EmbeddedBroker], zk_connect: str
) -> None:
    """The task fails with a clear error; running it again (Spark's retry) completes; nothing
    is missing; duplicates are only rows the failed attempt sent and are counted."""
    topic = "midway"
    values = [f"m{i}".encode() + b"." * 200 for i in range(40000)]
    # max.message.size 100000: the producer writes a broker's buffer every ~1 MiB
    p = plan(zk_connect, topic=topic, batch_size="200", max_message_size="100000")
    victim = brokers[1]

    handed = [0]  # rows the failed attempt was given

    def failing_input() -> Iterator[pa.RecordBatch]:
        for n, b in enumerate(batches(values, size=2000)):
            if n == 10:
                victim.stop()  # mid-task: data already sent to it is unconfirmed
            handed[0] += b.num_rows
            yield b

    try:
        with pytest.raises(DeliveryError) as e:
            TaskWriter(p, task="attempt 0").write(failing_input())
    finally:
        victim.restart()
    text = str(e.value)
    assert "attempt 0" in text and "broker 1" in text
    assert "Not confirmed (may or may not be in Kafka)" in text
    assert "Spark retries the task" in text
    assert e.value.unconfirmed  # what may be lost is itemised
    retry = TaskWriter(p, task="attempt 1").write(batches(values, size=2000))
    assert retry.error is None and retry.messages == len(values)
    found = read_topic(brokers, topic)
    got = Counter(v for vals in found.values() for v in vals)
    assert set(got) == set(values)  # nothing missing
    duplicates = sum(got.values()) - len(values)
    assert 0 < duplicates <= handed[0] < len(values)  # only rows attempt 0 got to send
    assert all(c <= 2 for c in got.values())


def test_commit_and_abort_logging(caplog: pytest.LogCaptureFixture) -> None:
    a = Kafka07CommitMessage(task="t0", rows=3, written={("x", 0, 0): (3, 100, 1)})
    b = Kafka07CommitMessage(task="t1", rows=2, written={("x", 0, 0): (2, 50, 1),
                                                         ("x", 1, 0): (0, 0, 0)})
    with caplog.at_level(logging.INFO, logger="kafka_pyspark._spark.write"):
        commit_job([a, b], "write")
        abort_job([a, None], "micro-batch 7")
    text = caplog.text
    assert "committed: 5 rows from 2 tasks" in text
    assert "topic 'x': 5 messages, 150 bytes [0-0: 5" in text
    assert "micro-batch 7 aborted: 1 of 2 tasks finished; what they wrote stays" in text
    assert "1 tasks failed: what they sent before failing may be partly in Kafka" in text


def test_commit_raises_the_tasks_error_whole() -> None:
    # the task's error crosses to the driver as itself: class and attributes kept
    short = AppendShortfallError("task 1: 1 partition short", unconfirmed={("x", 0, 0): (1, 90)})
    done = Kafka07CommitMessage(task="t1", rows=1, failure=short)
    with pytest.raises(AppendShortfallError, match=r"^task 1: 1 partition short\. Written") as e:
        commit_job([done], "write")
    assert e.value.unconfirmed == {("x", 0, 0): (1, 90)}


def test_explicit_target_that_cannot_exist_names_the_row(
    broker: EmbeddedBroker, zk_connect: str
) -> None:
    create_topic(zk_connect, [broker], "explicit")  # registered: the broker's 2 partitions

    def rows(partition: int) -> pa.RecordBatch:
        return pa.record_batch(
            [pa.array([0, 0], pa.int32()), pa.array([0, partition], pa.int32()),
             pa.array([b"a", b"b"], pa.binary())],
            names=["broker", "partition", "value"],
        )

    neg = TaskWriter(plan(zk_connect, EXPLICIT, topic="explicit"), task="t").write([rows(-1)])
    assert neg.error_type == "InvalidPartitionError"
    assert neg.error == ("row 1 of t: explicit target 0--1 of topic 'explicit': partition -1 "
                         "is not a partition number")
    far = TaskWriter(plan(zk_connect, EXPLICIT, topic="explicit"), task="t").write([rows(2)])
    assert far.error == (
        "row 1 of t: explicit target 0-2 of topic 'explicit': topic 'explicit' has 2 "
        "partitions on broker 0; a 0.7 broker closes the connection on a PRODUCE to partition 2"
    )
