"""``kafka07`` from SQL (docs/sql.md): temporary views for SELECT and INSERT INTO, catalog
tables refused with the alternative. Local Spark, real ZooKeeper, embedded brokers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from _cluster import read_log

from kafka_pyspark import partition_for_key, topic_partitions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = [pytest.mark.spark, pytest.mark.zk]


def _sql(spark: SparkSession, statement: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(statement).collect()]


def test_a_view_of_one_topic_is_read_and_inserted_into(
    spark: SparkSession, brokers: list[EmbeddedBroker], zk_connect: str
) -> None:
    opts = f"`zk.connect` '{zk_connect}', topic 'sql_events'"
    try:
        # explicit targets: partition 0 of each broker, so that both register the new topic
        spark.sql(f"CREATE TEMPORARY VIEW sql_first (broker INT, partition INT, value STRING) "
                  f"USING kafka07 OPTIONS ({opts})")
        spark.sql("INSERT INTO sql_first VALUES (0, 0, 'first0'), (1, 0, 'first1')")
        for b in brokers:
            b.wait_for_topic("sql_events")
        spark.sql(f"CREATE TEMPORARY VIEW sql_sink (key STRING, value STRING) USING kafka07 "
                  f"OPTIONS ({opts})")
        spark.sql("INSERT INTO sql_sink SELECT CONCAT('k', id % 7), CONCAT('v', id) "
                  "FROM range(40)")
        spark.sql(f"CREATE TEMPORARY VIEW sql_events USING kafka07 OPTIONS ({opts})")
        rows = _sql(spark, "SELECT topic, broker, partition, CAST(value AS STRING) "
                    "FROM sql_events")
        assert sorted(r[3] for r in rows) == sorted(
            ["first0", "first1", *(f"v{i}" for i in range(40))])
        assert {r[0] for r in rows} == {"sql_events"}
        assert {(r[1], r[2]) for r in rows if r[3].startswith("first")} == {(0, 0), (1, 0)}
        # keyed rows went where the writer's partitioner puts their key
        places = topic_partitions(zk_connect, "sql_events")
        expected = {f"v{i}": partition_for_key(f"k{i % 7}", places) for i in range(40)}
        assert {r[3]: (r[1], r[2]) for r in rows if r[3].startswith("v")} == expected
        # the same bytes, seen by the low-level client
        logged = read_log(brokers, "sql_events", "value")
        assert sum(len(v) for v in logged.values()) == 42
    finally:
        for view in ("sql_first", "sql_sink", "sql_events"):
            spark.sql(f"DROP VIEW IF EXISTS {view}")


def test_a_view_with_options_of_its_own_writes_compressed(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str
) -> None:
    try:
        spark.sql(f"CREATE TEMPORARY VIEW sql_gz (value STRING) USING kafka07 OPTIONS "
                  f"(`zk.connect` '{zk_connect}', topic 'sql_gz', `compression.codec` 'gzip')")
        spark.sql("INSERT INTO sql_gz SELECT CONCAT('g', id) FROM range(5)")
        spark.sql(f"CREATE TEMPORARY VIEW sql_gz_read USING kafka07 OPTIONS "
                  f"(`zk.connect` '{zk_connect}', subscribe 'sql_gz')")
        # range(5) is two Spark partitions on local[2]; their tasks append in either order
        assert _sql(spark, "SELECT compression, CAST(value AS STRING) AS v FROM sql_gz_read "
                    "ORDER BY v") == [("gzip", f"g{i}") for i in range(5)]
        with pytest.raises(Exception, match="overwrite"):  # a 0.7 topic only appends
            spark.sql("INSERT OVERWRITE sql_gz VALUES ('o')")
    finally:
        spark.sql("DROP VIEW IF EXISTS sql_gz")
        spark.sql("DROP VIEW IF EXISTS sql_gz_read")


def test_a_catalog_table_is_refused_with_the_alternative(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str
) -> None:
    with pytest.raises(Exception) as created:
        spark.sql(f"CREATE TABLE sql_t USING kafka07 OPTIONS "
                  f"(`zk.connect` '{zk_connect}', topic 'sql_t')")
    assert "option 'CREATE TABLE': kafka07 cannot be a catalog table" in str(created.value)
    assert "CREATE TEMPORARY VIEW" in str(created.value)
    # with columns Spark creates it without asking kafka07; its writes then come with no option
    spark.sql(f"CREATE TABLE sql_t2 (value STRING) USING kafka07 OPTIONS "
              f"(`zk.connect` '{zk_connect}', topic 'sql_t2')")
    try:
        with pytest.raises(Exception) as inserted:
            spark.sql("INSERT INTO sql_t2 VALUES ('x')")
        assert "no options at all" in str(inserted.value)
        assert "CREATE TEMPORARY VIEW" in str(inserted.value)
    finally:
        spark.sql("DROP TABLE IF EXISTS sql_t2")
    assert broker.topics() == []  # nothing was written anywhere
