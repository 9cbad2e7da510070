"""Read/cluster option parsing: pure (no ZooKeeper, no Spark session)."""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import pytest

from kafka_pyspark._cluster import BrokerAddress, Cluster
from kafka_pyspark._options import (
    CLUSTER_OPTIONS,
    READ_OPTIONS,
    Assign,
    ClusterOptions,
    Mode,
    Subscribe,
    SubscribePattern,
    java_regex_to_python,
    parse_cluster_options,
    parse_read_options,
    validate_read_options,
)
from kafka_pyspark.errors import OptionError

ZK = {"zk.connect": "127.0.0.1:2181/kafka"}
BL = {"broker.list": "0:127.0.0.1:9092,1:127.0.0.1:9093"}


def opts(**kw: Any) -> dict[str, str]:
    """Options as Spark hands them over: lower-cased names (CaseInsensitiveDict)."""
    base = {**ZK, "subscribe": "events"}
    base.update({k.replace("_", "."): str(v) for k, v in kw.items()})
    return {k.lower(): v for k, v in base.items()}


def option_error(options: dict[str, str], mode: Mode = "batch") -> OptionError:
    with pytest.raises(OptionError) as info:
        parse_read_options(options, mode)
    return info.value


# --- defaults and types ------------------------------------------------------------------------


def test_defaults_batch() -> None:
    o = parse_read_options(opts())
    assert o.mode == "batch"
    assert o.cluster == ClusterOptions("127.0.0.1:2181/kafka", None)
    assert o.subscription == Subscribe(("events",))
    assert o.starting.kind == "earliest"
    assert o.ending.kind == "latest"
    assert (o.fail_on_data_loss, o.fetch.verify_crc, o.min_partitions) == (True, True, None)
    assert (o.fetch.fetch_size, o.fetch.max_fetch_size) == (1 << 20, 100 << 20)
    assert (o.max_bytes_per_trigger, o.commit_to_group, o.group_id) == (None, False, None)


def test_defaults_stream_start_latest() -> None:
    o = parse_read_options(opts(), "stream")
    assert o.mode == "stream"
    assert o.starting.kind == "latest"


def test_options_are_frozen_and_picklable() -> None:
    o = parse_read_options(
        opts(startingOffsets='{"events": {"0-1": 5}}', minPartitions=3)
    )
    with pytest.raises(AttributeError):
        o.fetch = replace(o.fetch, fetch_size=5)  # type: ignore[misc]  # frozen: must fail
    assert pickle.loads(pickle.dumps(o)) == o


def test_case_insensitive_names_and_values() -> None:
    o = parse_read_options(
        {"ZK.CONNECT": "h:1", "Subscribe": "a", "STARTINGOFFSETS": "Latest",
         "failondataloss": "FALSE", "verifyChecksums": "false"}
    )
    assert o.starting.kind == "latest"
    assert o.fail_on_data_loss is False and o.fetch.verify_crc is False


def test_all_documented_names_known() -> None:
    assert set(CLUSTER_OPTIONS) == {
        "zk.connect", "broker.list", "zk.sessiontimeout.ms", "zk.connectiontimeout.ms",
        "zk.auth.user", "zk.auth.password", "socket.timeout.ms", "socket.buffersize",
    }
    assert {"subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
            "startingtimestamp", "group.id", "failondataloss", "minpartitions", "fetch.size",
            "max.fetch.size", "verifychecksums", "maxbytespertrigger",
            "committogroup"} <= READ_OPTIONS


# --- cluster -----------------------------------------------------------------------------------


def test_cluster_options_numbers() -> None:
    c = parse_cluster_options({**BL, "socket.timeout.ms": "1500", "socket.buffersize": "1024",
                               "zk.sessiontimeout.ms": "100"})
    # kept parsed: nothing downstream parses broker.list again
    assert c.broker_list == (
        BrokerAddress(0, "127.0.0.1", 9092), BrokerAddress(1, "127.0.0.1", 9093)
    )
    assert c.zk_connect is None
    assert (c.socket_timeout_ms, c.socket_buffer_size, c.zk_session_timeout_ms) == (1500, 1024, 100)
    with Cluster(c) as cluster:  # the parsed options are what the cluster takes
        assert list(cluster.brokers()) == [0, 1]


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({**ZK, **BL}, "broker.list"),
        ({}, "zk.connect"),
        ({"zk.connect": " "}, "zk.connect"),
        ({"zk.connect": "h:notaport"}, "zk.connect"),
        ({"zk.connect": "h:1/chroot/"}, "zk.connect"),
        ({"broker.list": "0:h"}, "broker.list"),
        ({"broker.list": "x:h:1"}, "broker.list"),
        ({**ZK, "socket.timeout.ms": "0"}, "socket.timeout.ms"),
        ({**ZK, "socket.timeout.ms": "1.5"}, "socket.timeout.ms"),
        ({**ZK, "socket.buffersize": "-1"}, "socket.buffersize"),
        ({**ZK, "zk.connectiontimeout.ms": "soon"}, "zk.connectiontimeout.ms"),
    ],
)
def test_cluster_option_errors(options: dict[str, str], name: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_cluster_options(options)
    assert info.value.option == name
    assert f"'{name}'" in str(info.value)


# --- names: unknown, wrong mode ----------------------------------------------------------------


def test_unknown_option_named() -> None:
    e = option_error(opts(startingOffset="earliest"))  # typo: no trailing s
    # Spark passes "startingoffset"; shown in the spelling of the option it resembles
    assert e.option == "startingOffset"
    assert "unknown option for reading; did you mean 'startingOffsets'?" in str(e)


def test_path_rejected() -> None:
    assert option_error({**opts(), "path": "/x"}).option == "path"


def test_write_option_rejected() -> None:
    e = option_error({**opts(), "compression.codec": "gzip"})
    assert e.option == "compression.codec" and "write option" in str(e)


def test_stream_only_options_in_batch() -> None:
    assert option_error(opts(maxBytesPerTrigger=10)).option == "maxBytesPerTrigger"
    assert option_error(opts(commitToGroup="true")).option == "commitToGroup"


def test_batch_only_option_in_stream() -> None:
    assert option_error(opts(endingOffsets="latest"), "stream").option == "endingOffsets"


def test_stream_options_parsed() -> None:
    o = parse_read_options(
        opts(maxBytesPerTrigger=4096, commitToGroup="true", **{"group.id": "g"}), "stream"
    )
    assert o.max_bytes_per_trigger == 4096 and o.commit_to_group and o.group_id == "g"


def test_validate_any_mode_accepts_both_kinds() -> None:
    validate_read_options(opts(maxBytesPerTrigger=10))
    validate_read_options(opts(endingOffsets="latest"))
    with pytest.raises(OptionError):
        validate_read_options(opts(bogus=1))


# --- subscription ------------------------------------------------------------------------------


def test_subscribe_list() -> None:
    o = parse_read_options(opts(subscribe=" a, b ,a,,c "))
    assert o.subscription == Subscribe(("a", "b", "c"))


@pytest.mark.parametrize("value", [" , ", "a/b", "..", "caf\u00e9"])
def test_subscribe_bad(value: str) -> None:
    assert option_error(opts(subscribe=value)).option == "subscribe"


def test_subscription_conflicts() -> None:
    e = option_error({**opts(), "assign": '{"a": ["0-0"]}'})
    assert e.option == "assign" and "subscribe" in str(e)
    e = option_error({**ZK, "subscribepattern": "a.*", "assign": '{"a": ["0-0"]}'})
    assert e.option == "assign"
    assert option_error(dict(ZK)).option == "subscribe"


def test_pattern_whitelist_semantics() -> None:
    o = parse_read_options({**ZK, "subscribepattern": " 'events.*, logs' "})
    sub = o.subscription
    assert isinstance(sub, SubscribePattern)
    assert sub.allows("events") and sub.allows("events-2") and sub.allows("logs")
    assert not sub.allows("logs2") and not sub.allows("my-events")  # full match only
    assert pickle.loads(pickle.dumps(sub)).allows("logs")


def test_pattern_java_constructs() -> None:
    assert java_regex_to_python(r"\p{Alnum}+") == "[a-zA-Z0-9]+"
    assert java_regex_to_python(r"[\p{Digit}_]+") == "[0-9_]+"
    assert java_regex_to_python(r"\P{Digit}") == "[^0-9]"
    assert java_regex_to_python(r"\Qa.b\E.*") == r"a\.b.*"
    sub = parse_read_options({**ZK, "subscribepattern": r"\Qa.b\E\p{Digit}"}).subscription
    assert isinstance(sub, SubscribePattern)
    assert sub.allows("a.b1") and not sub.allows("axb1")


@pytest.mark.parametrize("value", ["(", "", "a[", r"\p{Nope}"])
def test_pattern_bad(value: str) -> None:
    assert option_error({**ZK, "subscribepattern": value}).option == "subscribePattern"


def test_pattern_needs_zookeeper() -> None:
    e = option_error({**BL, "subscribepattern": "a.*"})
    assert e.option == "subscribePattern" and "zk.connect" in str(e)


def test_assign() -> None:
    o = parse_read_options({**BL, "assign": '{"b": ["1-0", "0-1"], "a": ["0-0", "0-0"]}'})
    assert o.subscription == Assign((("a", 0, 0), ("b", 0, 1), ("b", 1, 0)))


@pytest.mark.parametrize(
    "value",
    ['{"a": ["0"]}', '{"a": []}', '{"a": "0-0"}', "[]", "{}", "{", '{"a/b": ["0-0"]}',
     '{"a": ["-1-0"]}', '{"a": [0]}'],
)
def test_assign_bad(value: str) -> None:
    assert option_error({**ZK, "assign": value}).option == "assign"


# --- offsets -----------------------------------------------------------------------------------


def test_starting_offsets_json() -> None:
    o = parse_read_options(opts(startingOffsets='{"events": {"0-1": 1234, "1-0": -2, "0-0": -1}}'))
    assert o.starting.kind == "specific"
    assert o.starting.offsets == {("events", 0, 1): 1234, ("events", 1, 0): -2,
                                  ("events", 0, 0): -1}
    assert o.starting.default == "earliest"


def test_ending_offsets_json() -> None:
    o = parse_read_options(opts(endingOffsets='{"events": {"0-1": 99}}'))
    assert o.ending.kind == "specific" and o.ending.default == "latest"


@pytest.mark.parametrize(
    "value",
    ["{", "[1]", "{}", '{"events": {"0-1": 1.5}}', '{"events": {"0-1": true}}',
     '{"events": {"0-1": -3}}', '{"events": {"01": 5}}', '{"events": {}}',
     '{"events": [1]}', "first", '{"events": {"0-1": "5"}}'],
)
def test_starting_offsets_bad(value: str) -> None:
    assert option_error(opts(startingOffsets=value)).option == "startingOffsets"


def test_ending_offsets_earliest_word_rejected() -> None:
    assert option_error(opts(endingOffsets="earliest")).option == "endingOffsets"


def test_offsets_for_unsubscribed_topic() -> None:
    e = option_error(opts(startingOffsets='{"other": {"0-0": 0}}'))
    assert e.option == "startingOffsets" and "other" in str(e)
    e = option_error({**ZK, "assign": '{"a": ["0-0"]}', "endingoffsets": '{"a": {"0-1": 5}}'})
    assert e.option == "endingOffsets"


def test_start_after_end_in_json() -> None:
    e = option_error(opts(startingOffsets='{"events": {"0-0": 50}}',
                          endingOffsets='{"events": {"0-0": 40}}'))
    assert e.option == "startingOffsets"


def test_group_needs_group_id_and_zookeeper() -> None:
    assert option_error(opts(startingOffsets="group")).option == "group.id"
    e = option_error({**BL, "subscribe": "a", "startingoffsets": "group", "group.id": "g"})
    assert e.option == "zk.connect"
    o = parse_read_options(opts(startingOffsets="group", **{"group.id": "g"}))
    assert o.starting.kind == "group" and o.group_id == "g"
    assert option_error(opts(**{"group.id": "a/b"})).option == "group.id"


def test_commit_to_group_needs_group_id() -> None:
    assert option_error(opts(commitToGroup="true"), "stream").option == "group.id"


def test_starting_timestamp() -> None:
    o = parse_read_options(opts(startingTimestamp=1700000000000))
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1700000000000
    assert option_error(opts(startingTimestamp=-1)).option == "startingTimestamp"
    assert option_error(opts(startingTimestamp="yesterday")).option == "startingTimestamp"
    e = option_error(opts(startingTimestamp=1, startingOffsets="earliest"))
    assert e.option == "startingTimestamp" and "startingOffsets" in str(e)


# --- numbers and booleans ----------------------------------------------------------------------


def test_sizes() -> None:
    o = parse_read_options(opts(**{"fetch.size": 1000, "max.fetch.size": 5000}))
    assert (o.fetch.fetch_size, o.fetch.max_fetch_size) == (1000, 5000)
    # a small max.fetch.size lowers the default fetch.size with it
    assert parse_read_options(opts(**{"max.fetch.size": 4096})).fetch.fetch_size == 4096
    e = option_error(opts(**{"fetch.size": 5000, "max.fetch.size": 1000}))
    assert e.option == "fetch.size" and "max.fetch.size" in str(e)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("fetch.size", "0"),
        ("fetch.size", "1_000"),
        ("fetch.size", "1e6"),
        ("max.fetch.size", str(2**31)),
        ("minPartitions", "0"),
        ("minPartitions", "two"),
        ("failOnDataLoss", "yes"),
        ("verifyChecksums", "1"),
        ("max.decompressed.size", "0"),
    ],
)
def test_number_and_boolean_errors(name: str, value: str) -> None:
    e = option_error({**opts(), name.lower(): value})
    assert e.option == name
    assert value in str(e) or "between" in str(e)


def test_min_partitions() -> None:
    assert parse_read_options(opts(minPartitions=" 8 ")).min_partitions == 8


# --- ZooKeeper outages and credentials ---------------------------------------------------------


def test_zk_outage_max_ms_is_a_stream_option_with_a_default() -> None:
    sub = {**ZK, "subscribe": "t"}
    assert parse_read_options(sub, "stream").zk_outage_max_ms == 600_000
    assert parse_read_options({**sub, "zk.outage.max.ms": "0"}, "stream").zk_outage_max_ms == 0
    with pytest.raises(OptionError, match=r"zk\.outage\.max\.ms.*between 0"):
        parse_read_options({**sub, "zk.outage.max.ms": "-1"}, "stream")
    with pytest.raises(OptionError, match=r"zk\.outage\.max\.ms.*streaming option"):
        parse_read_options({**sub, "zk.outage.max.ms": "1000"}, "batch")


# credentials: tests/cluster/test_zk_auth.py


@pytest.mark.parametrize(
    ("name", "value", "key"),
    [
        ("startingOffsets", '{"events": {"0-0": 10}, "events": {"0-1": 5}}', "'events'"),
        ("startingOffsets", '{"events": {"0-0": 0, "0-0": 5}}', "'0-0'"),
        ("startingOffsets", '{"events": {"0-0": 7, "0-0": 7}}', "'0-0'"),
        ("endingOffsets", '{"events": {"0-1": 9}, "events": {"0-1": 9}}', "'events'"),
        ("endingOffsets", '{"events": {"1-2": 3, "1-2": 4}}', "'1-2'"),
        ("assign", '{"events": ["0-0"], "events": ["0-1"]}', "'events'"),
    ],
)
def test_duplicate_json_keys_are_errors(name: str, value: str, key: str) -> None:
    """A key given twice is an error naming it (json.loads alone would keep the last, silently)."""
    given = {**ZK, name.lower(): value} if name == "assign" else opts(**{name: value})
    e = option_error(given)
    assert e.option == name
    assert f"key {key} appears twice" in str(e)


def test_the_same_partition_spelt_twice_with_two_offsets_is_an_error() -> None:
    e = option_error(opts(startingOffsets='{"events": {"0-1": 5, "00-1": 6}}'))
    assert e.option == "startingOffsets"
    assert "broker-partition 0-1 is given twice" in str(e) and "5 and 6" in str(e)
    same = parse_read_options(opts(startingOffsets='{"events": {"0-1": 5, "00-1": 5}}'))
    assert same.starting.offsets == {("events", 0, 1): 5}
