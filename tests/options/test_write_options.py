"""Write options and input columns: parsed once on the driver, every mistake a clear error."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kafka_pyspark._cluster import BrokerAddress
from kafka_pyspark._options import (
    WriteOptions,
    parse_codec,
    parse_write_options,
    parse_write_options_only,
)
from kafka_pyspark._options.delivery_options import DeliveryOptions
from kafka_pyspark._options.write_columns import ColumnLayout
from kafka_pyspark._spark.write.driver import resolve_columns
from kafka_pyspark.errors import OptionError, SchemaError

ZK = {"zk.connect": "127.0.0.1:2181"}


def schema(**cols: DataType) -> StructType:
    return StructType([StructField(name, t, True) for name, t in cols.items()])


def test_defaults() -> None:
    w, c = parse_write_options({**ZK, "topic": "events"})
    assert w == WriteOptions(topic="events", codec="none", batch_size=200,
                             max_message_size=1_000_000, partitioner=None,
                             delivery=DeliveryOptions(guarantee="exactly-once"))
    assert c.zk_connect == "127.0.0.1:2181"
    assert c.broker_list is None


@pytest.mark.parametrize(
    ("raw", "name"),
    [("none", "none"), ("0", "none"), ("gzip", "gzip"), ("1", "gzip"), ("GZIP", "gzip"),
     ("snappy", "snappy"), ("2", "snappy"), (" 2 ", "snappy")],
)
def test_codecs(raw: str, name: str) -> None:
    assert parse_codec(raw) == name
    assert parse_write_options_only({"compression.codec": raw}).codec == name


@pytest.mark.parametrize("raw", ["lz4", "zstd", "3", "brotli", "", "-1"])
def test_bad_codecs(raw: str) -> None:
    with pytest.raises(OptionError, match=r"compression\.codec") as e:
        parse_codec(raw)
    assert "gzip (1)" in str(e.value)


@pytest.mark.parametrize(
    ("opt", "raw", "problem"),
    [
        ("batch.size", "0", "between 1"),
        ("batch.size", "many", "integer"),
        ("batch.size", "2.5", "integer"),
        ("max.message.size", "0", "between 1"),
        ("max.message.size", "3000000000", "between 1"),
        ("partitioner", "murmur", "unknown partitioner"),
        ("topic", "a/b", "not allowed"),
        ("topic", "..", "legal"),
        ("topic", "", "empty"),
        ("topic", "tëst", "ASCII"),
    ],
)
def test_bad_values(opt: str, raw: str, problem: str) -> None:
    with pytest.raises(OptionError, match=problem) as e:
        parse_write_options({**ZK, opt: raw})
    assert e.value.option == opt


def test_compression_level() -> None:
    assert parse_write_options_only({"compression.codec": "gzip"}).compression_level is None
    for raw, level in (("0", 0), ("1", 1), (" 9 ", 9)):
        opts = parse_write_options({**ZK, "topic": "t", "compression.codec": "1",
                                    "Compression.Level": raw})[0]
        assert opts.compression_level == level
    for codec, raw, problem in (("gzip", "10", "between 0 and 9"), ("gzip", "-1", "between 0"),
                                ("gzip", "fast", "integer"), ("snappy", "5", "gzip's deflate"),
                                ("none", "1", "compression.codec is none")):
        with pytest.raises(OptionError, match=problem) as e:
            parse_write_options({**ZK, "compression.codec": codec, "compression.level": raw})
        assert e.value.option == "compression.level"


def test_partitioner_aliases() -> None:
    for raw, name in [("hash", "hash"), ("RANDOM", "random"),
                      ("kafka.producer.DefaultPartitioner", "hash")]:
        assert parse_write_options_only({"partitioner": raw}).partitioner == name


def test_unknown_and_read_options() -> None:
    with pytest.raises(OptionError, match="unknown option") as e:
        parse_write_options({**ZK, "topic": "t", "batchsize": "10"})
    assert e.value.option == "batchsize"
    with pytest.raises(OptionError, match="read option"):
        parse_write_options({**ZK, "topic": "t", "subscribe": "t"})
    with pytest.raises(OptionError, match="no path"):
        parse_write_options({**ZK, "topic": "t", "path": "/tmp/x"})


def test_options_spark_adds_to_a_sink_are_accepted() -> None:
    # what a named writeStream, Spark Connect and a Declarative Pipelines flow hand the sink
    w, _ = parse_write_options({**ZK, "topic": "t", "checkpointlocation": "file:/tmp/ck",
                                "queryname": "copy"})
    assert w.topic == "t"
    with pytest.raises(OptionError, match="unknown option") as e:
        parse_write_options({**ZK, "topic": "t", "querynam": "copy"})
    assert e.value.option == "querynam"


def test_cluster_options_required_and_exclusive() -> None:
    with pytest.raises(OptionError, match=r"zk\.connect"):
        parse_write_options({"topic": "t"})
    with pytest.raises(OptionError):
        parse_write_options({"topic": "t", **ZK, "broker.list": "0:127.0.0.1:9092"})
    _, c = parse_write_options({"topic": "t", "broker.list": "0:127.0.0.1:9092"})
    assert c.broker_list == (BrokerAddress(0, "127.0.0.1", 9092),)


def test_case_insensitive_names() -> None:
    w, _ = parse_write_options({**ZK, "Topic": "t", "Compression.Codec": "1", "BATCH.SIZE": "7"})
    assert (w.topic, w.codec, w.batch_size) == ("t", "gzip", 7)


# --- columns ---------------------------------------------------------------------------


W = WriteOptions(topic="t")


def test_value_only() -> None:
    assert resolve_columns(schema(value=BinaryType()), W) == ColumnLayout(value="value")
    assert resolve_columns(schema(VALUE=StringType()), W).value == "VALUE"


def test_all_columns_and_extra_ignored() -> None:
    lay = resolve_columns(
        schema(value=StringType(), key=BinaryType(), topic=StringType(), broker=IntegerType(),
               partition=LongType(), offset=LongType(), compression=StringType()),
        WriteOptions(),
    )
    assert lay == ColumnLayout("value", "key", "topic", "broker", "partition", "hash")


def test_partitioner_choice() -> None:
    s = schema(value=BinaryType(), key=StringType())
    assert resolve_columns(s, W).partitioner == "hash"
    lay = resolve_columns(s, WriteOptions(topic="t", partitioner="random"))
    assert (lay.partitioner, lay.key) == ("random", None)
    assert resolve_columns(schema(value=BinaryType()), W).partitioner == "random"
    with pytest.raises(OptionError, match="needs a 'key' column"):
        resolve_columns(schema(value=BinaryType()), WriteOptions(topic="t", partitioner="hash"))


@pytest.mark.parametrize(
    ("cols", "message"),
    [
        ({"key": BinaryType()}, "needs a 'value' column"),
        ({"value": IntegerType()}, "'value' must be binary or string, not int"),
        ({"value": BinaryType(), "key": DoubleType()}, "'key' must be binary or string"),
        ({"value": BinaryType(), "topic": BinaryType()}, "'topic' must be string"),
        ({"value": BinaryType(), "broker": IntegerType()}, "needs a 'partition' column"),
        ({"value": BinaryType(), "partition": IntegerType()}, "needs a 'broker' column"),
        ({"value": BinaryType(), "broker": StringType(), "partition": IntegerType()},
         "'broker' must be int"),
        ({"value": BinaryType(), "Value": BinaryType()}, "both match 'value'"),
    ],
)
def test_bad_schemas(cols: dict[str, DataType], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        resolve_columns(schema(**cols), W)


def test_no_topic_anywhere() -> None:
    with pytest.raises(OptionError, match="no target topic"):
        resolve_columns(schema(value=BinaryType()), WriteOptions())
    # a topic column is enough
    assert resolve_columns(schema(value=BinaryType(), topic=StringType()), WriteOptions()).topic


def test_codec_spellings_are_the_message_layer_table() -> None:
    from kafka_pyspark._messages.layout import CODEC_ALIASES, CODEC_NAMES, codec_id

    for spelling, cid in CODEC_ALIASES.items():
        assert parse_codec(spelling.upper()) == CODEC_NAMES[cid]
        assert codec_id(spelling) == cid
    assert sorted(CODEC_ALIASES) == sorted(
        ["none", "gzip", "snappy", "0", "1", "2", "uncompressed", "nocompression"]
    )
