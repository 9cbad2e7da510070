"""errors.py: 0.7 error codes map to typed exceptions; one hierarchy under KafkaError."""

from __future__ import annotations

import pytest

from kafka_pyspark import errors
from kafka_pyspark.errors import (
    BrokerError,
    InvalidFetchSizeError,
    InvalidMessageError,
    KafkaError,
    OffsetOutOfRangeError,
    UnknownCodeError,
    UnknownError,
    WrongPartitionError,
    for_code,
    raise_for_code,
)

# docs/dev/PROTOCOL.md "Response header and error codes": the 0.7 error code table
CODES = [
    (-1, UnknownError, "Unknown"),
    (1, OffsetOutOfRangeError, "OffsetOutOfRange"),
    (2, InvalidMessageError, "InvalidMessage"),
    (3, WrongPartitionError, "WrongPartition"),
    (4, InvalidFetchSizeError, "InvalidFetchSize"),
]


@pytest.mark.parametrize(("code", "cls", "name"), CODES)
def test_known_codes_map_to_typed_classes(code: int, cls: type[BrokerError], name: str) -> None:
    assert for_code(code) is cls
    assert cls.code == code and cls.name == name
    with pytest.raises(cls) as info:
        raise_for_code(code, "topic 'events' partition 1 on 127.0.0.1:9092")
    err = info.value
    assert type(err) is cls
    assert err.code == code
    assert str(err) == f"{name} (error code {code}): topic 'events' partition 1 on 127.0.0.1:9092"
    assert isinstance(err, BrokerError) and isinstance(err, KafkaError)


@pytest.mark.parametrize("code", [-32768, -2, 5, 6, 99, 32767])
def test_unknown_codes_fall_back(code: int) -> None:
    assert for_code(code) is UnknownCodeError
    with pytest.raises(UnknownCodeError) as info:
        raise_for_code(code, "ctx")
    assert info.value.code == code
    assert str(info.value) == f"UnknownErrorCode (error code {code}): ctx"
    assert isinstance(info.value, BrokerError)


def test_zero_is_not_an_error() -> None:
    raise_for_code(0)  # returns quietly
    raise_for_code(0, "anything")
    with pytest.raises(ValueError, match="NoError"):
        for_code(0)


def test_message_without_context() -> None:
    assert str(WrongPartitionError()) == "WrongPartition (error code 3)"
    assert str(UnknownCodeError(code=42)) == "UnknownErrorCode (error code 42)"


def test_codes_are_distinct_and_classes_distinct() -> None:
    classes = [cls for _, cls, _ in CODES]
    assert len(set(classes)) == len(classes)
    for cls in classes:
        for other in classes:
            if cls is not other:
                assert not issubclass(cls, other)


def test_every_public_error_derives_from_kafka_error() -> None:
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, KafkaError), name


def test_option_error_names_the_option() -> None:
    err = errors.OptionError("broker.list", "entry 'x' is not 'id:host:port'")
    assert err.option == "broker.list"
    assert str(err) == "option 'broker.list': entry 'x' is not 'id:host:port'"
    assert isinstance(err, ValueError)


def test_message_errors_carry_the_offset() -> None:
    err = errors.CorruptMessageError("CRC mismatch", offset=34)
    assert err.offset == 34
    assert str(err) == "CRC mismatch (at offset 34)"
    assert str(errors.CorruptMessageError("CRC mismatch")) == "CRC mismatch"


def test_connection_errors_are_builtin_compatible() -> None:
    assert issubclass(errors.BrokerConnectionError, ConnectionError)
    assert issubclass(errors.BrokerTimeoutError, TimeoutError)
    assert issubclass(errors.BrokerTimeoutError, errors.BrokerConnectionError)


def test_with_context_keeps_class_and_attributes() -> None:
    # OptionError's constructor takes (option, message): the old reflection fell back to
    # another class for it; with_context never changes the class
    e = errors.OptionError("batch.size", "must be >= 1, got 0")
    got = errors.with_context(e, "write job", then=" (from the DataFrame writer)")
    assert type(got) is errors.OptionError and got.option == "batch.size"
    assert str(got) == (
        "write job: option 'batch.size': must be >= 1, got 0 (from the DataFrame writer)"
    )
    m = errors.CorruptMessageError("CRC mismatch", offset=42)
    got_m = errors.with_context(m, "topic 't' broker 0 partition 1")
    assert type(got_m) is errors.CorruptMessageError and got_m.offset == 42
    assert str(got_m) == "topic 't' broker 0 partition 1: CRC mismatch (at offset 42)"
    assert str(errors.with_context(m)) == str(m)


def test_kafka_errors_pickle_whole() -> None:
    import pickle

    d = errors.AppendShortfallError("short", unconfirmed={("t", 0, 1): (2, 300)})
    back = pickle.loads(pickle.dumps(errors.with_context(d, "task 3")))
    assert type(back) is errors.AppendShortfallError
    assert str(back) == "task 3: short" and back.unconfirmed == {("t", 0, 1): (2, 300)}
    o = pickle.loads(pickle.dumps(errors.OptionError("port", "bad")))  # (option, message)
    assert type(o) is errors.OptionError and o.option == "port"
    assert str(o) == "option 'port': bad"
