"""What decoding a message set gave, as one comparable value, for tests that decode the same
bytes on several paths (kernel lanes, the pure-Python path, with and without a sink): the rows
and positions, or the typed error with its offset and text."""

from __future__ import annotations

from typing import Any

from kafka_pyspark._messages import decode_message_set
from kafka_pyspark.errors import MessageError


def outcome(data: bytes, base: int = 1000, **kw: Any) -> tuple[Any, ...]:
    try:
        r = decode_message_set(data, base, **kw)
    except MessageError as e:
        return type(e), e.offset, str(e)
    return (r.batch.to_pydict(), r.next_offset, r.bytes_consumed, r.message_count,
            r.partial_size)
