"""The ``brokerId-partition`` key: one format, one parser, the same answer on every path."""

from __future__ import annotations

import json

import pytest

from kafka_pyspark._options import parse_offsets_json
from kafka_pyspark._shared.partition_key import parse_partition_key, partition_key
from kafka_pyspark._spark.stream.checkpoint import from_offset_dict
from kafka_pyspark.errors import OffsetFormatError, OptionError

# keys a regex like r"^(\d+)-(\d+)$" would accept and every parser must refuse: a trailing
# newline ($ matches before it) and digits of other scripts (\d is Unicode)
_ODD_KEYS = ("0-1\n", "\u0660-1", "0-\u0661", "\uff10-1")


def test_parse_partition_name() -> None:
    assert parse_partition_key("0-1") == (0, 1)
    assert parse_partition_key("12-345") == (12, 345)
    for bad in ("0_1", "0-", "-1", "a-1", "0-1-2", "0-1 ", "-1-0"):
        assert parse_partition_key(bad) is None


def test_format_and_parse_round_trip() -> None:
    assert partition_key(0, 1) == "0-1"
    assert partition_key(12, 345) == "12-345"
    assert parse_partition_key(partition_key(2147483647, 0)) == (2147483647, 0)


@pytest.mark.parametrize("key", _ODD_KEYS)
def test_key_parser_takes_ascii_digits_only(key: str) -> None:
    assert parse_partition_key(key) is None
    assert parse_partition_key(None) is None
    assert parse_partition_key(1) is None


@pytest.mark.parametrize("key", _ODD_KEYS)
def test_checkpoint_and_options_refuse_the_same_keys(key: str) -> None:
    with pytest.raises(OptionError, match="is not 'brokerId-partition'"):
        parse_offsets_json("startingOffsets", json.dumps({"t": {key: 5}}))
    with pytest.raises(OffsetFormatError, match="is not 'brokerId-partition'"):
        from_offset_dict({"t": {key: 5}})
    assert from_offset_dict({"t": {"0-1": 5}}) == {("t", 0, 1): 5}


def test_every_path_words_a_bad_key_the_same_way() -> None:
    import argparse
    import re

    from kafka_pyspark._shared.partition_key import not_a_partition_key
    from kafka_pyspark.cli._common import parse_broker_partition

    wording = re.escape(not_a_partition_key("0_1"))
    with pytest.raises(OptionError, match=wording):
        parse_offsets_json("startingOffsets", '{"t": {"0_1": 5}}')
    with pytest.raises(OffsetFormatError, match=wording):
        from_offset_dict({"t": {"0_1": 5}})
    with pytest.raises(argparse.ArgumentTypeError, match=wording):
        parse_broker_partition("0_1")


@pytest.mark.parametrize("group", ["", ".", "..", "a/b", "g\x01", "g\x7f", "g\ufff0",
                                   # outside the BMP: ZooKeeper refuses the surrogate pair
                                   "g\U0001f600", "\U00010000", "g\U0010ffff"])
def test_group_id_is_checked_once_for_options_and_registry(group: str) -> None:
    from kafka_pyspark._options import parse_read_options
    from kafka_pyspark._shared.partition_key import check_group_id

    # the options and the registry ask the same check_group_id, so a group id the registry would
    # refuse at the stream's first commit is refused when the options are parsed
    with pytest.raises(OptionError, match="is not a legal group id") as info:
        parse_read_options(
            {
                "zk.connect": "127.0.0.1:2181",
                "subscribe": "t",
                "group.id": group,
                "startingOffsets": "group",
            }
        )
    assert info.value.option == "group.id"
    with pytest.raises(OptionError, match="is not a legal group id"):
        check_group_id(group)
    assert check_group_id("my-group.v2") == "my-group.v2"
    assert check_group_id("gr\u00fcppe-\u4e2d\uffef") == "gr\u00fcppe-\u4e2d\uffef"  # BMP: taken
