"""Property tests for kafka_pyspark._wire: round trips, truncation, trailing bytes, garbage.

Every decoder must either return a value or raise ProtocolError -- never struct.error,
IndexError, UnicodeDecodeError or a hang -- whatever bytes it is given.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_pyspark import _wire as wire
from kafka_pyspark._wire import (
    FetchRequest,
    FetchResponse,
    MultiFetchRequest,
    MultiFetchResponse,
    MultiProduceRequest,
    OffsetsRequest,
    OffsetsResponse,
    ProduceRequest,
)
from kafka_pyspark.client._framing import (
    fetch_answer_bound,
    multifetch_answer_bound,
    offsets_answer_bound,
)
from kafka_pyspark.errors import ProtocolError

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TOPIC = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
MESSAGES = st.binary(max_size=300)

produce = st.builds(ProduceRequest, TOPIC, INT32, MESSAGES)
fetch = st.builds(FetchRequest, TOPIC, INT32, INT64, INT32)
offsets = st.builds(OffsetsRequest, TOPIC, INT32, INT64, INT32)
multifetch = st.builds(MultiFetchRequest, st.lists(fetch, max_size=8).map(tuple))
multiproduce = st.builds(MultiProduceRequest, st.lists(produce, max_size=8).map(tuple))
requests = st.one_of(produce, fetch, offsets, multifetch, multiproduce)

fetch_parts = st.lists(st.tuples(INT16, MESSAGES), max_size=8)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def only_protocol_errors(fn: Callable[[], Any]) -> None:
    """Run a decoder; ProtocolError is fine, any other exception is a bug."""
    with contextlib.suppress(ProtocolError):
        fn()


# --- round trips ---------------------------------------------------------------------------


@FAST
@given(requests)
def test_request_round_trip(req: wire.Request) -> None:
    frame = wire.encode_request(req)
    assert wire.frame_length(frame[:4]) == len(frame) - 4
    assert wire.decode_request(frame[4:]) == req


@FAST
@given(INT16, MESSAGES)
def test_fetch_response_round_trip(error: int, messages: bytes) -> None:
    frame = wire.encode_fetch_response(error, messages)
    assert wire.frame_length(frame[:4]) == len(frame) - 4
    assert wire.decode_fetch_response(frame[4:]) == FetchResponse(error, messages)
    header = wire.encode_fetch_response_header(error, len(messages))
    assert header + messages == frame


@FAST
@given(INT16, st.lists(INT64, max_size=50))
def test_offsets_response_round_trip(error: int, values: list[int]) -> None:
    frame = wire.encode_offsets_response(error, values)
    assert wire.frame_length(frame[:4]) == len(frame) - 4
    assert wire.decode_offsets_response(frame[4:]) == OffsetsResponse(error, tuple(values))


@FAST
@given(fetch_parts)
def test_multifetch_response_round_trip(parts: list[tuple[int, bytes]]) -> None:
    frame = wire.encode_multifetch_response(parts)
    assert wire.frame_length(frame[:4]) == len(frame) - 4
    want = MultiFetchResponse(0, tuple(FetchResponse(e, m) for e, m in parts))
    assert wire.decode_multifetch_response(frame[4:]) == want
    assert wire.decode_multifetch_response(frame[4:], expected=len(parts)) == want


# --- truncated bodies and trailing bytes ---------------------------------------------------


@FAST
@given(requests)
def test_every_truncated_request_is_a_protocol_error(req: wire.Request) -> None:
    body = wire.encode_request(req)[4:]
    for n in range(len(body)):
        with pytest.raises(ProtocolError):
            wire.decode_request(body[:n])


@FAST
@given(requests, st.binary(min_size=1, max_size=20))
def test_trailing_bytes_after_a_request_are_a_protocol_error(
    req: wire.Request, extra: bytes
) -> None:
    body = wire.encode_request(req)[4:]
    with pytest.raises(ProtocolError, match="trailing"):
        wire.decode_request(body + extra)


@FAST
@given(INT16, MESSAGES)
def test_truncated_fetch_response_header(error: int, messages: bytes) -> None:
    body = wire.encode_fetch_response(error, messages)[4:]
    for n in (0, 1):
        with pytest.raises(ProtocolError):
            wire.decode_fetch_response(body[:n])
    # any longer prefix is a valid (shorter) message set: partial tails are the codec's job
    for n in range(2, len(body) + 1):
        assert bytes(wire.decode_fetch_response(body[:n]).messages) == messages[: n - 2]


@FAST
@given(st.lists(INT64, max_size=20))
def test_every_truncated_offsets_response_is_a_protocol_error(values: list[int]) -> None:
    body = wire.encode_offsets_response(0, values)[4:]
    for n in range(len(body)):
        with pytest.raises(ProtocolError):
            wire.decode_offsets_response(body[:n])


@FAST
@given(INT16, st.lists(INT64, max_size=20), st.binary(min_size=1, max_size=20))
def test_trailing_bytes_after_offsets_are_a_protocol_error(
    error: int, values: list[int], extra: bytes
) -> None:
    body = wire.encode_offsets_response(error, values)[4:]
    with pytest.raises(ProtocolError):
        wire.decode_offsets_response(body + extra)


@FAST
@given(fetch_parts)
def test_every_truncated_multifetch_response_is_a_protocol_error(
    parts: list[tuple[int, bytes]],
) -> None:
    body = wire.encode_multifetch_response(parts)[4:]
    for n in range(len(body)):
        with pytest.raises(ProtocolError):
            wire.decode_multifetch_response(body[:n], expected=len(parts))


@FAST
@given(fetch_parts, st.binary(min_size=1, max_size=20))
def test_trailing_bytes_after_multifetch_are_a_protocol_error(
    parts: list[tuple[int, bytes]], extra: bytes
) -> None:
    body = wire.encode_multifetch_response(parts)[4:]
    with pytest.raises(ProtocolError):
        wire.decode_multifetch_response(body + extra, expected=len(parts))


# --- garbage -------------------------------------------------------------------------------


@FAST
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_escape_as_other_errors(data: bytes) -> None:
    only_protocol_errors(lambda: wire.decode_request(data))
    only_protocol_errors(lambda: wire.decode_fetch_response(data))
    only_protocol_errors(lambda: wire.decode_offsets_response(data))
    only_protocol_errors(lambda: wire.decode_multifetch_response(data))
    only_protocol_errors(lambda: wire.decode_multifetch_response(data, expected=2))
    only_protocol_errors(lambda: wire.frame_length(data[:4]))


@FAST
@given(requests, st.data())
def test_mutated_requests_never_escape_as_other_errors(req: wire.Request, data: Any) -> None:
    body = bytearray(wire.encode_request(req)[4:])
    if not body:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    only_protocol_errors(lambda: wire.decode_request(bytes(body)))


@FAST
@given(INT16.filter(lambda t: t not in (0, 1, 2, 3, 4)), st.binary(max_size=40))
def test_unknown_request_type_is_a_protocol_error(rtype: int, rest: bytes) -> None:
    with pytest.raises(ProtocolError, match=f"unknown request type {rtype}"):
        wire.decode_request(struct.pack(">h", rtype) + rest)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (bytes.fromhex("0001 ffff"), "negative TOPIC_LENGTH"),
        (bytes.fromhex("0002 ffff"), "negative TOPICPARTITION_COUNT"),
        (bytes.fromhex("0003 8000"), "negative TOPICPARTITION_COUNT"),
        (bytes.fromhex("0000 0001 74 00000000 ffffffff"), "negative MESSAGES_LENGTH"),
        (bytes.fromhex("0003 0001 0001 74 00000000 80000000"), "negative MESSAGES_LENGTH"),
        (bytes.fromhex("0000 0001 74 00000000 7fffffff"), "truncated"),
        (bytes.fromhex("0001 0001 ff 00000000 0000000000000000 00000000"), "not ASCII"),
        (bytes.fromhex("0063"), "unknown request type 99"),
        (b"", "truncated"),
        (b"\x00", "truncated"),
    ],
)
def test_malformed_request_bodies(body: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        wire.decode_request(body)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (bytes.fromhex("0000 ffffffff"), "negative NUMBER_OFFSETS"),
        (bytes.fromhex("0000 7fffffff"), "truncated"),
        (bytes.fromhex("0000 00000001 00000000"), "truncated"),
    ],
)
def test_malformed_offsets_responses(body: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        wire.decode_offsets_response(body)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (bytes.fromhex("0000 00000001 00"), "part length 1 < 2"),
        (bytes.fromhex("0000 ffffffff"), "part length -1 < 2"),
        (bytes.fromhex("0000 00000010 0000 00"), "truncated"),
        (bytes.fromhex("0000 000000"), "truncated"),
    ],
)
def test_malformed_multifetch_responses(body: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        wire.decode_multifetch_response(body)


def test_frame_length() -> None:
    assert wire.frame_length(b"\x00\x00\x01\x00") == 256
    assert wire.frame_length(memoryview(b"\x7f\xff\xff\xff")) == 2**31 - 1
    with pytest.raises(ProtocolError, match="negative"):
        wire.frame_length(b"\xff\xff\xff\xff")
    for bad in (b"", b"\x00\x00\x00", b"\x00\x00\x00\x00\x00"):
        with pytest.raises(ProtocolError, match="4 bytes"):
            wire.frame_length(bad)


# --- encoding out-of-range values ----------------------------------------------------------


@pytest.mark.parametrize(
    "req",
    [
        FetchRequest("t", 2**31, 0, 0),
        FetchRequest("t", 0, 2**63, 0),
        FetchRequest("t", 0, 0, -(2**31) - 1),
        OffsetsRequest("t", -(2**31) - 1, -1, 1),
        OffsetsRequest("t", 0, -1, 2**31),
        ProduceRequest("t", 2**31, b""),
        MultiFetchRequest((FetchRequest("t", 0, 2**64, 0),)),
        MultiProduceRequest((ProduceRequest("t", -(2**32), b""),)),
        FetchRequest("caf\u00e9", 0, 0, 0),
        FetchRequest("x" * 32768, 0, 0, 0),
        MultiFetchRequest(tuple(FetchRequest("t", 0, 0, 0) for _ in range(32768))),
    ],
    ids=lambda r: type(r).__name__,
)
def test_unencodable_requests_are_protocol_errors(req: wire.Request) -> None:
    with pytest.raises(ProtocolError):
        wire.encode_request(req)


def test_largest_encodable_values_round_trip() -> None:
    reqs: list[wire.Request] = [
        FetchRequest("x" * 32767, 2**31 - 1, 2**63 - 1, 2**31 - 1),
        OffsetsRequest("t", -(2**31), -(2**63), -(2**31)),
        MultiFetchRequest(tuple(FetchRequest("t", i, i, i) for i in range(32767))),
    ]
    for req in reqs:
        assert wire.decode_request(wire.encode_request(req)[4:]) == req


@pytest.mark.parametrize(
    "encode",
    [
        lambda: wire.encode_fetch_response(2**15, b""),
        lambda: wire.encode_fetch_response_header(0, 2**31),
        lambda: wire.encode_offsets_response(0, [2**63]),
        lambda: wire.encode_offsets_response(-(2**15) - 1, []),
        lambda: wire.encode_multifetch_response([(2**15, b"")]),
    ],
)
def test_unencodable_responses_are_protocol_errors(encode: Callable[[], bytes]) -> None:
    with pytest.raises(ProtocolError):
        encode()


def test_answer_bounds_are_the_largest_encoded_answers() -> None:
    """The client's answer bounds come from the same wire sizes the answers are encoded with."""
    assert len(wire.encode_fetch_response(0, b"m" * 300)) - 4 == fetch_answer_bound(300)
    assert len(wire.encode_offsets_response(0, [5, 4, 3])) - 4 == offsets_answer_bound(3)
    fetches = (wire.FetchRequest("a", 0, 0, 100), wire.FetchRequest("bb", 1, 7, 20))
    full = wire.encode_multifetch_response([(0, b"x" * 100), (0, b"y" * 20)])
    assert len(full) - 4 == multifetch_answer_bound(fetches)
