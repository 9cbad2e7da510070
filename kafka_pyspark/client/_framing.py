"""What the client knows about 0.7 request frames without sending them: answer bounds, limits,
and the human description of a request used in every error message (request sizes are the wire
layer's, :func:`kafka_pyspark._wire.produce_request_size`)."""

from __future__ import annotations

from kafka_pyspark import _wire as wire

#: 0.7.2's ``max.socket.request.bytes`` default: a larger request body makes the broker close
#: the connection without appending anything.
BROKER_MAX_REQUEST_BYTES = 100 * 1024 * 1024

_MAX_OFFSETS_RESPONSE = 64 << 20


def describe(req: wire.Request) -> str:
    """A short human description of a request for error messages."""
    if isinstance(req, wire.FetchRequest):
        return (
            f"FETCH topic {req.topic!r} partition {req.partition} offset {req.offset} "
            f"max size {req.max_size}"
        )
    if isinstance(req, wire.OffsetsRequest):
        return (
            f"OFFSETS topic {req.topic!r} partition {req.partition} time {req.time} "
            f"max number {req.max_number}"
        )
    if isinstance(req, wire.ProduceRequest):
        return f"PRODUCE topic {req.topic!r} partition {req.partition} ({len(req.messages)} bytes)"
    if isinstance(req, wire.MultiFetchRequest):
        return f"MULTIFETCH of {len(req.fetches)} fetches"
    return describe_multiproduce(len(req.produces), sum(len(p.messages) for p in req.produces))


def describe_multiproduce(items: int, nbytes: int) -> str:
    """:func:`describe` of a MULTIPRODUCE of ``items`` message sets, ``nbytes`` in all."""
    return f"MULTIPRODUCE of {items} message sets ({nbytes} bytes)"


def fetch_answer_bound(max_size: int) -> int:
    """The largest FETCH answer body a broker may send for ``max_size``."""
    return wire.FETCH_RESPONSE_HEADER_SIZE + max_size


def multifetch_answer_bound(fetches: tuple[wire.FetchRequest, ...]) -> int:
    """The largest MULTIFETCH answer body for these fetches."""
    return wire.FETCH_RESPONSE_HEADER_SIZE + sum(
        wire.MULTIFETCH_PART_HEADER_SIZE + f.max_size for f in fetches
    )


def offsets_answer_bound(max_number: int) -> int:
    """The largest OFFSETS answer body for ``max_number`` offsets (capped)."""
    body = wire.OFFSETS_RESPONSE_HEADER_SIZE + wire.OFFSET_SIZE * max(max_number, 0)
    return min(body, _MAX_OFFSETS_RESPONSE)


def check_int32(name: str, value: int) -> None:
    """``value`` must fit a non-negative int32 field."""
    if not 0 <= value <= wire.INT32_MAX:
        raise ValueError(f"{name} must be between 0 and {wire.INT32_MAX}, got {value}")
