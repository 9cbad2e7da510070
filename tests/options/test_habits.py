"""Unknown option names: Spark's Kafka 0.10+ source options get a pointer to what Kafka 0.7
takes, near misses a "did you mean", on every path (batch and stream reads, writes, segment
files). Options arrive lower-cased, as Spark hands them over."""

from __future__ import annotations

import pytest

from kafka_pyspark._options import parse_read_options, parse_write_options
from kafka_pyspark._options.habits import SPARK_KAFKA_POINTERS, spelt_like, unknown_option
from kafka_pyspark._options.option_names import canonical_name
from kafka_pyspark._options.segment_path import parse_segment_options
from kafka_pyspark._options.subscription import Subscribe
from kafka_pyspark.errors import OptionError

ZK = {"zk.connect": "127.0.0.1:2181"}
READ = {**ZK, "subscribe": "events"}
WRITE = {**ZK, "topic": "events"}
SPARK_KAFKA_POINTERS_NAMES = {n.lower(): n for n in SPARK_KAFKA_POINTERS}


def read_error(extra: dict[str, str], mode: str = "stream") -> OptionError:
    with pytest.raises(OptionError) as e:
        parse_read_options({**READ, **extra}, mode)  # type: ignore[arg-type]
    return e.value


def write_error(extra: dict[str, str]) -> OptionError:
    with pytest.raises(OptionError) as e:
        parse_write_options({**WRITE, **extra})
    return e.value


@pytest.mark.parametrize("mode", ["batch", "stream"])
def test_bootstrap_servers_points_to_the_registry_or_the_broker_list(mode: str) -> None:
    e = read_error({"kafka.bootstrap.servers": "h:9092"}, mode)
    assert e.option == "kafka.bootstrap.servers"
    assert str(e) == (
        "option 'kafka.bootstrap.servers': Kafka 0.7 has no bootstrap servers: give zk.connect "
        "(the ZooKeeper the brokers register in, 'host:2181[/chroot]') or broker.list "
        "('brokerId:host:port,...')"
    )
    assert str(write_error({"kafka.bootstrap.servers": "h:9092"})) == str(e)


def test_offsets_per_trigger_points_to_bytes() -> None:
    e = read_error({"maxoffsetspertrigger": "1000"})
    assert e.option == "maxOffsetsPerTrigger"  # the spelling of Spark's documentation
    assert "offsets are byte positions, not message counts: use maxBytesPerTrigger" in str(e)
    assert "Spark 4.0/4.1 run Trigger.AvailableNow as one micro-batch" in str(e)
    for name in ("minoffsetspertrigger", "maxtriggerdelay"):
        e = read_error({name: "5"})
        assert e.option == SPARK_KAFKA_POINTERS_NAMES[name]
        assert "is not supported" in str(e) and "trigger(processingTime=...)" in str(e)


def test_headers_timestamps_and_groups() -> None:
    assert str(read_error({"includeheaders": "true"})) == (
        "option 'includeHeaders': Kafka 0.7 messages have no headers"
    )
    assert str(write_error({"includeheaders": "true"})).endswith("have no headers")
    e = read_error({"startingoffsetsbytimestamp": '{"events": {"0": 1}}'}, "batch")
    assert e.option == "startingOffsetsByTimestamp" and "use startingTimestamp" in str(e)
    assert "use endingOffsets" in str(read_error({"endingtimestamp": "1"}, "batch"))
    assert "use group.id" in str(read_error({"kafka.group.id": "g"}))


def test_tls_and_sasl_say_plaintext_only() -> None:
    for name in ("kafka.security.protocol", "kafka.ssl.truststore.location",
                 "kafka.sasl.mechanism"):
        e = read_error({name: "x"})
        assert e.option == name
        assert "plaintext only (no TLS, no SASL)" in str(e)
        assert "zk.auth.user/zk.auth.password" in str(e)


def test_other_kafka_client_configs() -> None:
    e = read_error({"kafka.client.id": "x"})
    assert e.option == "kafka.client.id"
    assert "prefixed 'kafka.' configure the client of Spark's Kafka 0.10+ source" in str(e)
    assert "use compression.codec" in str(write_error({"kafka.compression.type": "lz4"}))


def test_sink_options_on_a_reader_point_to_the_sink() -> None:
    e = read_error({"checkpointlocation": "/ck"})
    assert e.option == "checkpointLocation" and "df.writeStream" in str(e)
    assert read_error({"queryname": "q"}).option == "queryName"


@pytest.mark.parametrize(
    ("typed", "shown", "meant"),
    [
        ("subcribe", "subcribe", "subscribe"),
        ("subscribepatern", "subscribePatern", "subscribePattern"),
        ("maxbytepertrigger", "maxBytePerTrigger", "maxBytesPerTrigger"),
        ("zk.conect", "zk.conect", "zk.connect"),
    ],
)
def test_near_miss_suggests_the_option(typed: str, shown: str, meant: str) -> None:
    e = read_error({typed: "x"})
    assert e.option == shown
    assert f"unknown option for reading; did you mean '{meant}'? Known options: " in str(e)
    # the listing keeps the documented spellings, as without a suggestion
    listing = str(read_error({"bogus": "1"})).split("known options: ")[1]
    assert str(e).endswith(f"Known options: {listing}")
    assert "maxBytesPerTrigger, " in listing


def test_near_miss_when_writing_and_reading_segments() -> None:
    e = write_error({"compresion.codec": "gzip"})
    assert e.option == "compresion.codec"
    assert "unknown option for writing; did you mean 'compression.codec'?" in str(e)
    with pytest.raises(OptionError) as s:
        parse_segment_options({"path": "/logs", "maxpartitionbyte": "1"})
    assert s.value.option == "maxPartitionByte"
    assert "reading segment files; did you mean 'maxPartitionBytes'?" in str(s.value)


def test_far_from_everything_lists_the_options() -> None:
    e = read_error({"bogus": "1"})
    assert e.option == "bogus"
    assert "unknown option for reading; known options: assign, broker.list," in str(e)
    assert "did you mean" not in str(e)


@pytest.mark.parametrize("mode", ["batch", "stream"])
def test_topic_when_reading_is_that_one_topic_unless_another_subscription_is_given(
    mode: str,
) -> None:
    # a SQL view over one topic is read and written with the same options (docs/sql.md)
    alone = parse_read_options({**ZK, "topic": "events"}, mode)  # type: ignore[arg-type]
    assert alone.subscription == Subscribe(("events",))
    for other, value in (("subscribe", "events"), ("subscribepattern", "ev.*"),
                         ("assign", '{"events": ["0-0"]}')):
        with pytest.raises(OptionError) as e:
            parse_read_options({**ZK, "topic": "events", other: value}, mode)  # type: ignore[arg-type]
        assert e.value.option == "topic"
        assert str(e.value).startswith(
            f"option 'topic': conflicts with {canonical_name(other)}: a read takes topic")
    with pytest.raises(OptionError, match="option 'topic': "):
        parse_read_options({**ZK, "topic": "bad/name"}, mode)  # type: ignore[arg-type]
    with pytest.raises(OptionError) as s:  # segment files filter topics with subscribe
        parse_segment_options({"path": "/logs", "topic": "events"})
    assert str(s.value) == (
        "option 'topic': is a write option; it has no meaning when reading "
        "(to read a topic, use subscribe)"
    )


@pytest.mark.parametrize(
    ("option", "value", "key"),
    [("assign", '{"events": [0, 1]}', "0"), ("startingOffsets", '{"events": {"0": 5}}', "'0'")],
)
def test_spark_style_partition_numbers(option: str, value: str, key: str) -> None:
    extra = {"assign": value} if option == "assign" else {**READ, "startingoffsets": value}
    options = {**ZK, **extra}
    with pytest.raises(OptionError) as e:
        parse_read_options(options, "batch")
    assert str(e.value) == (
        f"option '{option}': topic 'events': {key} is not 'brokerId-partition' (e.g. '0-1', as "
        "0.7 names broker-partitions); a bare partition number is how Spark's Kafka 0.10+ "
        "source names a partition, but 0.7 numbers partitions per broker"
    )


def test_every_pointer_is_no_option_of_ours() -> None:
    for name in SPARK_KAFKA_POINTERS:
        if name in ("checkpointLocation", "queryName"):  # taken by writers, refused by readers
            continue
        for parse in (lambda o: parse_read_options({**READ, **o}, "stream"),
                      lambda o: parse_write_options({**WRITE, **o})):
            with pytest.raises(OptionError) as e:
                parse({name.lower(): "1"})
            assert e.value.option == name


def test_spelt_like() -> None:
    assert spelt_like("startingoffset", "startingOffsets") == "startingOffset"
    assert spelt_like("subcribe", "subscribe") == "subcribe"
    assert spelt_like("x", "y") == "x"
    assert unknown_option("mindpartitions", "reading", ["minPartitions"]).option == (
        "mindPartitions"
    )
