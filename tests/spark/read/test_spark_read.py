"""The batch reader against a real ZooKeeper and embedded 0.7 brokers, through Spark and not.

One cluster per module (two brokers, small segments) holds the topics every test reads; the
expected rows, offsets included, are computed here from the bytes produced, independently of
the reader. Driver-side option paths are checked by calling the reader's ``partitions()`` and
:func:`read_partition` in-process (real sockets, no Spark); Spark runs the end-to-end reads.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _cluster import kafka_partitions

from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.batch import Kafka07BatchReader
from kafka_pyspark._spark.read.executor import read_partition
from kafka_pyspark._spark.read.planning import Kafka07InputPartition, TaskSettings
from kafka_pyspark._spark.schema import ARROW_READ_SCHEMA, READ_SCHEMA
from kafka_pyspark.client import FetchSettings, OffsetRange
from kafka_pyspark.errors import (
    DataLossError,
    KafkaError,
    OptionError,
    TopicNotFoundError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from kafka_pyspark.testing._zookeeper import ZooKeeperServer
    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = [pytest.mark.zk]

Row = tuple[str, int, int, int, int, int, str, bytes]
"""(topic, broker, partition, offset, next_offset, inner_index, compression, value)"""

COLUMNS = [f.name for f in READ_SCHEMA.fields]
SEGMENT = 32 * 1024  # small log.file.size: every partition spans several segments
MIXED = "mixed"


# --- producing with expected rows ------------------------------------------------------------


@dataclass
class Log:
    """What the test wrote to one broker-partition, offsets computed from the bytes."""

    end: int = 0
    rows: list[Row] = field(default_factory=list)
    set_starts: list[int] = field(default_factory=list)


@dataclass
class Data:
    logs: dict[TopicPartition, Log] = field(default_factory=dict)

    def log(self, topic: str, broker: int, partition: int) -> Log:
        return self.logs.setdefault((topic, broker, partition), Log())

    def rows(self, topic: str | None = None) -> list[Row]:
        return [r for (t, _, _), lg in sorted(self.logs.items()) if topic in (None, t)
                for r in lg.rows]


def add_set(
    producer: Any, data: Data, topic: str, broker: int, partition: int,
    values: Sequence[bytes], codec: str, magic: int = 1,
) -> None:
    from kafka_pyspark._messages import encode_message_set

    lg = data.log(topic, broker, partition)
    encoded = encode_message_set(list(values), compression=codec, magic=magic)
    lg.set_starts.append(lg.end)
    if codec == "none":
        # magic 1: int32 length, magic, attributes, int32 CRC; magic 0: no attributes
        sizes = [(10 if magic == 1 else 9) + len(v) for v in values]
        assert sum(sizes) == len(encoded)
        for v, size in zip(values, sizes, strict=True):
            lg.rows.append((topic, broker, partition, lg.end, lg.end + size, 0, "none", v))
            lg.end += size
    else:
        after = lg.end + len(encoded)  # one wrapper message holds the whole set
        for i, v in enumerate(values):
            lg.rows.append((topic, broker, partition, lg.end, after, i, codec, v))
        lg.end = after
    producer.send(broker, topic, partition, encoded)


def fill(producer: Any, data: Data, topic: str, broker: int, partition: int,
         rng: random.Random, sets: int) -> None:
    """``sets`` message sets of 1-40 messages of 0-1500 bytes, codecs and magics mixed."""
    for i in range(sets):
        codec = ("none", "gzip", "snappy")[rng.randrange(3)]
        magic = 0 if i % 7 == 3 else 1
        values = [
            b"" if rng.random() < 0.1 else rng.randbytes(rng.randrange(1, 1500))
            if rng.random() < 0.3 else (f"{topic}/{broker}-{partition}/{i}/{j} ".encode()
                                        * rng.randrange(1, 40))
            for j in range(rng.randrange(1, 41))
        ]
        add_set(producer, data, topic, broker, partition, values, codec, magic)


# --- the module's cluster ---------------------------------------------------------------------


@dataclass
class Cluster:
    zk: str
    brokers: list[EmbeddedBroker]
    data: Data

    def options(self, **kw: Any) -> dict[str, str]:
        out: dict[str, str] = {"zk.connect": self.zk}
        out.update({k: str(v) for k, v in kw.items()})
        return out


def _chroot(zookeeper: ZooKeeperServer) -> str:
    return str(zookeeper.new_chroot("read"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    from kafka_pyspark.client import Producer
    from kafka_pyspark.testing.broker import EmbeddedBroker

    zk = _chroot(zookeeper)
    tmp = tmp_path_factory.mktemp("read-cluster")
    b0 = EmbeddedBroker(0, log_dir=tmp / "b0", zk_connect=zk, num_partitions=2,
                        log_file_size=SEGMENT, max_message_size=8_000_000)
    b1 = EmbeddedBroker(1, log_dir=tmp / "b1", zk_connect=zk, num_partitions=3,
                        log_file_size=SEGMENT, max_message_size=8_000_000)
    with b0, b1:
        data = Data()
        rng = random.Random(7)
        with Producer({0: (b0.host, b0.port), 1: (b1.host, b1.port)}) as producer:
            # MIXED: 4 of the 5 broker-partitions (1-2 stays empty), several segments each
            for broker, partition in ((0, 0), (0, 1), (1, 0), (1, 1)):
                fill(producer, data, MIXED, broker, partition, rng, 60)
            # messages of several MB, plain and inside a gzip wrapper, then more small ones
            add_set(producer, data, MIXED, 0, 1, [rng.randbytes(3_000_000)], "none")
            add_set(producer, data, MIXED, 1, 0, [b"x" * 2_500_000, b"", b"y"], "gzip")
            add_set(producer, data, MIXED, 1, 0, [rng.randbytes(2_000_000)], "snappy")
            fill(producer, data, MIXED, 0, 1, rng, 5)
            # small topics for subscribePattern
            for topic in ("logs-a", "logs-b", "other"):
                add_set(producer, data, topic, 0, 0, [topic.encode()] * 3, "none")
            producer.flush()
        for b in (b0, b1):
            b.wait_for_topic(MIXED)
        b0.wait_for_topic("logs-a")
        b0.wait_for_topic("logs-b")
        b0.wait_for_topic("other")
        for key, lg in data.logs.items():
            topic, broker, partition = key
            assert (b0, b1)[broker].log_end(topic, partition) == lg.end, key
        yield Cluster(zk, [b0, b1], data)


# --- helpers ----------------------------------------------------------------------------------


def reader(options: dict[str, str]) -> Kafka07BatchReader:
    return Kafka07BatchReader({k.lower(): v for k, v in options.items()}, READ_SCHEMA)


def plan(options: dict[str, str]) -> list[Kafka07InputPartition]:
    return kafka_partitions(reader(options).partitions())


def batches_rows(batches: Iterable[Any]) -> list[Row]:
    rows: list[Row] = []
    for b in batches:
        assert b.schema.equals(ARROW_READ_SCHEMA)
        rows.extend(zip(*(b.column(i).to_pylist() for i in range(b.num_columns)), strict=True))
    return rows


def read_in_process(parts: Iterable[Any]) -> list[Row]:
    return batches_rows(b for p in parts for b in read_partition(p))


def spark_rows(df: Any) -> list[Row]:
    # a tuple built from COLUMNS has no fixed length for mypy; Row spells out the columns
    return [tuple(r[c] if c != "value" else bytes(r[c]) for c in COLUMNS)  # type: ignore[misc]
            for r in df.collect()]


def load(spark: SparkSession, options: dict[str, str]) -> Any:
    r = spark.read.format("kafka07")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def keyed(rows: Iterable[Row]) -> Counter[Row]:
    return Counter(rows)


# --- Spark, end to end ------------------------------------------------------------------------


@pytest.mark.spark
def test_read_everything_exactly(spark: SparkSession, cluster: Cluster) -> None:
    got = spark_rows(load(spark, cluster.options(subscribe=MIXED)))
    want = cluster.data.rows(MIXED)
    assert len(got) == len(want)
    assert keyed(got) == keyed(want)
    assert {r[6] for r in got} == {"none", "gzip", "snappy"}
    assert any(len(r[7]) == 0 for r in got) and max(len(r[7]) for r in got) == 3_000_000


@pytest.mark.spark
def test_small_fetch_size_many_segments_min_partitions(
    spark: SparkSession, cluster: Cluster
) -> None:
    b1 = cluster.brokers[1]
    assert len(b1.segment_files(MIXED, 1)) > 3  # the topic spans several segments
    options = cluster.options(subscribe=MIXED, minPartitions=24, **{"fetch.size": 2048})
    df = load(spark, options)
    assert df.rdd.getNumPartitions() >= 24
    got = spark_rows(df)
    assert keyed(got) == keyed(cluster.data.rows(MIXED))  # nothing lost or doubled at cuts


def test_min_partitions_split_at_segment_starts(cluster: Cluster) -> None:
    parts = plan(cluster.options(subscribe=MIXED, minPartitions=30))
    assert len(parts) >= 30
    for p in parts:
        assert len(p.ranges) == 1
    by_log: dict[TopicPartition, list[OffsetRange]] = {}
    for p in parts:
        r = p.ranges[0]
        by_log.setdefault(r.key, []).append(r)
    for key, pieces in by_log.items():
        lg = cluster.data.logs[key]
        pieces.sort()
        assert pieces[0].start == 0 and pieces[-1].end == lg.end
        for a, b in itertools.pairwise(pieces):
            assert a.end == b.start and b.start in lg.set_starts  # a message boundary
    assert (MIXED, 1, 2) not in by_log  # the empty partition plans nothing
    # read in-process: exactly the produced rows
    assert keyed(read_in_process(parts)) == keyed(cluster.data.rows(MIXED))


@pytest.mark.spark
def test_resume_at_next_offset(spark: SparkSession, cluster: Cluster) -> None:
    data = cluster.data
    inner = next(r for r in data.logs[(MIXED, 0, 1)].rows[50:] if r[5] == 1)  # in a wrapper
    plain = next(r for r in data.logs[(MIXED, 1, 1)].rows[40:] if r[6] == "none")
    starting = f'{{"{MIXED}": {{"0-1": {inner[4]}, "1-1": {plain[4]}}}}}'
    options = cluster.options(assign=f'{{"{MIXED}": ["0-1", "1-1"]}}', startingOffsets=starting)
    got = spark_rows(load(spark, options))
    want = [r for r in data.logs[(MIXED, 0, 1)].rows if r[3] >= inner[4]] + [
        r for r in data.logs[(MIXED, 1, 1)].rows if r[3] >= plain[4]
    ]
    assert keyed(got) == keyed(want)
    # exactly the rows after the resumed one, in log order
    rows01 = data.logs[(MIXED, 0, 1)].rows
    after = rows01[rows01.index(inner) + 1:]
    assert sorted(r for r in got if r[2] == 1 and r[1] == 0) == sorted(
        r for r in after if r[3] != inner[3]
    )


@pytest.mark.spark
def test_filter_pushdown_matches_spark_filtering(spark: SparkSession, cluster: Cluster) -> None:
    rows10 = cluster.data.logs[(MIXED, 1, 0)].rows
    low, high = rows10[len(rows10) // 4][3], rows10[len(rows10) // 2][3]
    where = f"broker = 1 AND partition IN (0, 2) AND offset >= {low} AND offset < {high}"
    want = [r for r in cluster.data.rows(MIXED)
            if r[1] == 1 and r[2] in (0, 2) and low <= r[3] < high]
    df = load(spark, cluster.options(subscribe=MIXED)).where(where)
    assert keyed(spark_rows(df)) == keyed(want)
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.set(key, "false")
    try:  # the reader still works (and is still correct) with pushdown off
        df = load(spark, cluster.options(subscribe=MIXED)).where(where)
        assert keyed(spark_rows(df)) == keyed(want)
    finally:
        spark.conf.set(key, "true")


@pytest.mark.spark
def test_filtered_query_does_not_leak_into_later_queries(
    spark: SparkSession, cluster: Cluster
) -> None:
    # Spark 4.3 reuses the plan made during one query's filter pushdown for later scans of the
    # same DataFrame (see pushdown.NARROW_PLAN): the later unfiltered count must still be whole.
    df = load(spark, cluster.options(subscribe=MIXED))
    want = cluster.data.rows(MIXED)
    assert df.where("broker = 1 AND partition = 0").count() == sum(
        1 for r in want if r[1:3] == (1, 0)
    )
    assert df.count() == len(want)
    assert df.where("partition = 1").count() == sum(1 for r in want if r[2] == 1)
    assert df.groupBy().count().collect()[0][0] == len(want)


def _filters(low: int, high: int) -> list[Any]:
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThanOrEqual,
        In,
        LessThan,
        StringStartsWith,
    )

    return [EqualTo(("broker",), 1), In(("partition",), (0, 2)),
            GreaterThanOrEqual(("offset",), low), LessThan(("offset",), high),
            StringStartsWith(("compression",), "g")]


def test_push_filters_keep_the_plan_where_spark_would_reuse_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_pyspark._spark.read import pushdown

    monkeypatch.setattr(pushdown, "NARROW_PLAN", False)
    r = reader(cluster.options(subscribe=MIXED))
    full = r.partitions()
    filters = _filters(0, 100)
    rest = list(r.pushFilters(filters))
    assert len(rest) == len(filters) and all(a is b for a, b in zip(rest, filters, strict=True))
    assert r.partitions() == full


def test_push_filters_shrink_the_plan(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_pyspark._spark.read import pushdown

    monkeypatch.setattr(pushdown, "NARROW_PLAN", True)  # as on a Spark that scopes plans
    rows10 = cluster.data.logs[(MIXED, 1, 0)].rows
    low, high = rows10[len(rows10) // 4][3], rows10[len(rows10) // 2][3]
    r = reader(cluster.options(subscribe=MIXED))
    full = r.partitions()
    filters = _filters(low, high)
    rest = list(r.pushFilters(filters))
    assert rest == filters[2:] and all(a is b for a, b in zip(rest, filters[2:], strict=True))
    parts = r.partitions()
    assert len(parts) < len(full)
    ranges = [x for p in kafka_partitions(parts) for x in p.ranges]
    assert [x.key for x in ranges] == [(MIXED, 1, 0)]
    (x,) = ranges
    lg = cluster.data.logs[(MIXED, 1, 0)]
    assert 0 < x.start <= low and high <= x.end < lg.end  # narrowed to segment boundaries
    rows = read_in_process(parts)
    assert {r for r in lg.rows if low <= r[3] < high} <= set(rows)
    assert len(rows) < len(lg.rows)


def test_push_filters_invisible_to_spark_pushdown_check() -> None:
    from pyspark.sql.datasource import DataSourceReader

    r = Kafka07BatchReader({"zk.connect": "h:1", "subscribe": "t"}, READ_SCHEMA)
    # Spark's planner raises DATA_SOURCE_PUSHDOWN_DISABLED (pushdown off by default) when this
    # is not the base function; the reader must work either way.
    assert getattr(r.pushFilters, "__func__", None) is DataSourceReader.pushFilters


@pytest.mark.spark
def test_empty_partition_reads_nothing(spark: SparkSession, cluster: Cluster) -> None:
    options = cluster.options(assign=f'{{"{MIXED}": ["1-2"]}}')
    assert plan(options) == []
    assert load(spark, options).count() == 0  # Spark reads its placeholder partition


@pytest.mark.spark
def test_topic_not_found_is_clear(spark: SparkSession, cluster: Cluster) -> None:
    with pytest.raises(TopicNotFoundError, match="'no-such-topic'"):
        plan(cluster.options(subscribe="no-such-topic"))
    with pytest.raises(Exception, match="TopicNotFoundError") as info:
        load(spark, cluster.options(subscribe=f"{MIXED},no-such-topic")).count()
    assert "no-such-topic" in str(info.value)


@pytest.mark.spark
def test_option_error_at_load_names_option(spark: SparkSession, cluster: Cluster) -> None:
    for options, name in (
        # Spark passes "startingofsets": shown in the spelling of the option it resembles
        (cluster.options(subscribe=MIXED, startingOfsets="earliest"), "startingOfsets"),
        (cluster.options(subscribe=MIXED, startingOffsets="{bad json"), "startingOffsets"),
        ({**cluster.options(subscribe=MIXED), "broker.list": "0:h:1"}, "broker.list"),
        (cluster.options(subscribe=MIXED, assign='{"a": ["0-0"]}'), "assign"),
    ):
        with pytest.raises(Exception, match="OptionError") as info:
            load(spark, options)  # no action: fails at load()
        # Spark 4.0 hands the source the option names as spelled, later versions lower-cased
        assert f"option '{name.lower()}'" in str(info.value).lower()
    # load() cannot tell batch from stream: a stream-only option fails when the batch is planned
    df = load(spark, cluster.options(subscribe=MIXED, maxBytesPerTrigger="5"))
    with pytest.raises(Exception, match="OptionError") as info:
        df.count()
    assert "option 'maxBytesPerTrigger'" in str(info.value)


# --- option paths, driver side (no Spark) -----------------------------------------------------


def test_subscribe_several_and_pattern(cluster: Cluster) -> None:
    parts = plan(cluster.options(subscribe="logs-a,logs-b"))
    assert {r.topic for p in parts for r in p.ranges} == {"logs-a", "logs-b"}
    parts = plan(cluster.options(subscribePattern="logs-.*"))
    assert {r.topic for p in parts for r in p.ranges} == {"logs-a", "logs-b"}
    rows = read_in_process(parts)
    assert keyed(rows) == keyed(cluster.data.rows("logs-a") + cluster.data.rows("logs-b"))
    parts = plan(cluster.options(subscribePattern="logs-a,oth.*"))  # 0.7 whitelist: commas
    assert {r.topic for p in parts for r in p.ranges} == {"logs-a", "other"}
    assert plan(cluster.options(subscribePattern="ogs-.*")) == []  # full match only


def test_assign(cluster: Cluster) -> None:
    parts = plan(cluster.options(assign=f'{{"{MIXED}": ["1-1", "0-0"], "other": ["0-0"]}}'))
    keys = sorted(r.key for p in parts for r in p.ranges)
    assert keys == [(MIXED, 0, 0), (MIXED, 1, 1), ("other", 0, 0)]
    with pytest.raises(OptionError, match="0-5") as info:
        plan(cluster.options(assign=f'{{"{MIXED}": ["0-5"]}}'))
    assert info.value.option == "assign"
    with pytest.raises(OptionError, match="broker 7"):
        plan(cluster.options(assign=f'{{"{MIXED}": ["7-0"]}}'))
    # the error names the assigned partition of the missing broker, not the topic's first one
    with pytest.raises(OptionError, match="'mixed' 7-3: broker 7"):
        plan(cluster.options(assign=f'{{"{MIXED}": ["0-0", "7-3"]}}'))
    with pytest.raises(TopicNotFoundError):
        plan(cluster.options(assign='{"nope": ["0-0"]}'))


def test_latest_and_ending_offsets(cluster: Cluster) -> None:
    assert plan(cluster.options(subscribe=MIXED, startingOffsets="latest")) == []
    rows00 = cluster.data.logs[(MIXED, 0, 0)].rows
    cut = rows00[len(rows00) // 2][3]  # a message (or wrapper) start
    ending = f'{{"{MIXED}": {{"0-0": {cut}, "1-1": -2}}}}'
    parts = plan(cluster.options(subscribe=MIXED, endingOffsets=ending))
    ends = {r.key: r.end for p in parts for r in p.ranges}
    assert ends[(MIXED, 0, 0)] == cut
    assert (MIXED, 1, 1) not in ends  # -2: earliest, an empty range
    assert ends[(MIXED, 0, 1)] == cluster.data.logs[(MIXED, 0, 1)].end
    rows = [r for r in read_in_process(parts) if r[1:3] == (0, 0)]
    assert keyed(rows) == keyed(r for r in rows00 if r[3] < cut)
    # out of range / inconsistent JSON
    end = cluster.data.logs[(MIXED, 0, 0)].end
    with pytest.raises(OptionError) as info:
        plan(cluster.options(subscribe=MIXED, endingOffsets=f'{{"{MIXED}": {{"0-0": {end + 1}}}}}'))
    assert info.value.option == "endingOffsets"
    with pytest.raises(OptionError) as info:
        plan(cluster.options(subscribe=MIXED,
                             startingOffsets=f'{{"{MIXED}": {{"0-0": {end + 10}}}}}'))
    assert info.value.option == "startingOffsets"
    with pytest.raises(OptionError) as info:
        plan(cluster.options(subscribe=MIXED, startingOffsets=f'{{"{MIXED}": {{"9-9": 0}}}}'))
    assert "9-9" in str(info.value)


def test_group_offsets(cluster: Cluster) -> None:
    from kafka_pyspark._cluster import Registry

    rows00 = cluster.data.logs[(MIXED, 0, 0)].rows
    committed = rows00[123][4]  # a next_offset, as a 0.7 consumer commits
    with Registry(cluster.zk) as reg:
        reg.commit_group_offsets("readers", MIXED, {(0, 0): committed}, creator="test")
    parts = plan(cluster.options(subscribe=MIXED, startingOffsets="group",
                                 **{"group.id": "readers"}))
    starts = {r.key: r.start for p in parts for r in p.ranges}
    assert starts[(MIXED, 0, 0)] == committed
    assert starts[(MIXED, 1, 0)] == 0  # never committed: earliest
    rows = [r for r in read_in_process(parts) if r[1:3] == (0, 0)]
    assert keyed(rows) == keyed(r for r in rows00 if r[3] >= committed)
    # a group that never committed anything reads everything
    parts = plan(cluster.options(subscribe=MIXED, startingOffsets="group", **{"group.id": "new"}))
    assert all(r.start == 0 for p in parts for r in p.ranges)


def test_starting_timestamp_segment_granularity(cluster: Cluster) -> None:
    b0 = cluster.brokers[0]
    files: list[Path] = b0.segment_files(MIXED, 0)
    assert len(files) >= 4
    starts = [int(f.name.split(".")[0]) for f in files]
    now = time.time()
    # segment i was last modified i hours ago... then oldest first: mtime grows with i
    for i, f in enumerate(files):
        t = now - 3600 * (len(files) - i)
        os.utime(f, (t, t))
    ts_ms = int((now - 3600 * (len(files) - 2) + 60) * 1000)  # just after segment 2's mtime
    parts = plan(cluster.options(assign=f'{{"{MIXED}": ["0-0"]}}', startingTimestamp=ts_ms))
    (p,) = parts
    assert p.ranges[0].start == starts[2]  # newest segment last modified before ts
    # before every segment: the earliest offset; after all of them: the log end (nothing)
    parts = plan(cluster.options(assign=f'{{"{MIXED}": ["0-0"]}}', startingTimestamp=1000))
    assert parts[0].ranges[0].start == 0


def test_data_loss_while_reading(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    b0 = cluster.brokers[0]
    end = cluster.data.logs[(MIXED, 0, 0)].end
    # a range past the log end: the broker answers OffsetOutOfRange (log truncated/recreated)
    gone = OffsetRange(MIXED, 0, 0, end + 1000, end + 2000)
    ok = OffsetRange(MIXED, 0, 1, 0, cluster.data.logs[(MIXED, 0, 1)].end)

    def part(fail: bool, *ranges: OffsetRange) -> Kafka07InputPartition:
        return Kafka07InputPartition(0, b0.host, b0.port, ranges, FetchSettings(),
                                     TaskSettings(fail_on_data_loss=fail))

    with pytest.raises(DataLossError) as info:
        read_in_process([part(True, gone)])
    text = str(info.value)
    assert f"'{MIXED}'" in text and "broker 0" in text and "partition 0" in text
    assert str(end + 1000) in text
    with caplog.at_level("WARNING"):
        assert read_in_process([part(False, gone)]) == []
    assert any(str(end + 1000) in rec.getMessage() for rec in caplog.records)
    # packed with a healthy range (MULTIFETCH): the healthy one is read whole
    rows = read_in_process([part(False, gone, ok)])
    assert keyed(rows) == keyed(cluster.data.logs[(MIXED, 0, 1)].rows)
    with pytest.raises(DataLossError):
        read_in_process([part(True, ok, gone)])


def test_multifetch_packing_reads_exactly(cluster: Cluster) -> None:
    parts = plan(cluster.options(subscribe="logs-a,logs-b,other"))
    assert len(parts) == 1 and len(parts[0].ranges) == 3  # small ranges of one broker packed
    want = [r for t in ("logs-a", "logs-b", "other") for r in cluster.data.rows(t)]
    assert keyed(read_in_process(parts)) == keyed(want)


def test_verify_checksums_off_and_fetch_sizes(cluster: Cluster) -> None:
    options = cluster.options(assign=f'{{"{MIXED}": ["0-1"]}}', verifyChecksums="false",
                              **{"fetch.size": 512, "max.fetch.size": 4 << 20})
    parts = plan(options)
    assert parts[0].fetch.verify_crc is False and parts[0].fetch.fetch_size == 512
    assert keyed(read_in_process(parts)) == keyed(cluster.data.logs[(MIXED, 0, 1)].rows)
    # the 3 MB message does not fit a 2 MB ceiling: a clear error naming where
    options = cluster.options(assign=f'{{"{MIXED}": ["0-1"]}}',
                              **{"fetch.size": 4096, "max.fetch.size": 2 << 20})
    with pytest.raises(KafkaError, match=r"max\.fetch\.size") as info:
        read_in_process(plan(options))
    assert "partition 1" in str(info.value)


# --- broker.list, no ZooKeeper ----------------------------------------------------------------


@pytest.fixture(scope="module")
def lone_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Data]]:
    from kafka_pyspark.client import Producer
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with EmbeddedBroker(3, log_dir=tmp_path_factory.mktemp("lone"), num_partitions=2,
                        log_file_size=SEGMENT) as b:
        data = Data()
        rng = random.Random(3)
        with Producer({3: (b.host, b.port)}) as producer:
            fill(producer, data, "plain", 3, 0, rng, 20)
            fill(producer, data, "plain", 3, 1, rng, 20)
            producer.flush()
        b.wait_for_topic("plain")
        yield b, data


@pytest.mark.spark
def test_broker_list_without_zookeeper(spark: SparkSession, lone_broker: tuple[Any, Data]) -> None:
    b, data = lone_broker
    options = {"broker.list": f"3:{b.host}:{b.port}", "subscribe": "plain"}
    got = spark_rows(load(spark, options))
    assert keyed(got) == keyed(data.rows("plain"))
    parts = plan({**options, "minPartitions": "6"})
    assert len(parts) >= 6
    parts = plan({"broker.list": f"3:{b.host}:{b.port}", "assign": '{"plain": ["3-1"]}'})
    assert keyed(read_in_process(parts)) == keyed(data.logs[("plain", 3, 1)].rows)
    with pytest.raises(OptionError, match="no partition 5"):
        plan({"broker.list": f"3:{b.host}:{b.port}", "assign": '{"plain": ["3-5"]}'})


def test_fetch_answers_combined_into_bounded_batches(cluster: Cluster) -> None:
    b0 = cluster.brokers[0]
    lg = cluster.data.logs[(MIXED, 0, 0)]
    ranges = (OffsetRange(MIXED, 0, 0, 0, lg.end),)

    def batches(batch_rows: int = 65536, batch_bytes: int = 16 << 20) -> list[Any]:
        settings = FetchSettings(fetch_size=4096)
        task = TaskSettings(batch_rows=batch_rows, batch_bytes=batch_bytes)
        return list(read_partition(Kafka07InputPartition(0, b0.host, b0.port, ranges, settings,
                                                         task)))

    small = batches(batch_rows=300)
    sizes = [b.num_rows for b in small]
    # combined up to 300 rows; an answer of 75 rows or more goes alone
    assert len(small) > 2 and all(n >= 75 for n in sizes[:-1])
    assert all(n < 300 + 4096 for n in sizes)  # at most one fetch answer past the bound
    assert keyed(batches_rows(small)) == keyed(lg.rows)
    assert len(batches(batch_rows=1 << 20)) == 1  # the whole partition is below these bounds
    answers = batches(batch_bytes=1)  # one batch per fetch answer
    # answers of at least batch_rows // 4 rows are not combined (no copy of their values)
    smallest = min(a.num_rows for a in answers[:-1])
    alone = batches(batch_rows=4 * smallest)
    assert [b.num_rows for b in alone][:-1] == [a.num_rows for a in answers][:-1]
    by_bytes = batches(batch_bytes=64 << 10)
    assert len(answers) > len(by_bytes) > 2
    assert all(b.nbytes < (64 << 10) + max(a.nbytes for a in answers) for b in by_bytes)
    assert keyed(batches_rows(by_bytes)) == keyed(lg.rows)


def test_pushed_filters_and_json_offsets_for_filtered_out_partitions(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.datasource import EqualTo

    from kafka_pyspark._spark.read import pushdown

    monkeypatch.setattr(pushdown, "NARROW_PLAN", True)
    r = reader(cluster.options(subscribe=MIXED, startingOffsets=f'{{"{MIXED}": {{"0-1": 0}}}}',
                               endingOffsets=f'{{"{MIXED}": {{"0-0": 0}}}}'))
    assert list(r.pushFilters([EqualTo(("broker",), 1)])) == []
    assert {x.broker for p in kafka_partitions(r.partitions()) for x in p.ranges} == {1}


def test_executor_socket_buffers_hold_one_fetch_answer(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kafka_pyspark.client as client_module

    asked: list[int] = []

    class Recording(client_module.BrokerConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            asked.append(kwargs["buffer_size"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(client_module, "BrokerConnection", Recording)
    b0 = cluster.brokers[0]
    lg = cluster.data.logs[(MIXED, 0, 0)]
    ranges = (OffsetRange(MIXED, 0, 0, 0, lg.end),)
    for socket_buffer, fetch, expected in ((65536, 1 << 20, 1 << 20), (4 << 20, 1 << 20, 4 << 20),
                                           (65536, 4096, 65536)):
        settings = FetchSettings(fetch_size=fetch)
        task = TaskSettings(socket_buffer_size=socket_buffer)
        got = list(read_partition(Kafka07InputPartition(0, b0.host, b0.port, ranges, settings,
                                                        task)))
        assert keyed(batches_rows(got)) == keyed(lg.rows)
        assert asked.pop() == expected
