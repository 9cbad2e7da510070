"""Typed keyword sets that tests pass on with ``**``, so mypy checks each name and type.

``DecodeOptions``: the keyword options of ``decode_message_set``. ``Retry``: the timeout and
retry options of ``BrokerConnection`` and ``Producer``, with ``FAST``: a short timeout and
backoff and one retry, so a test of a failing peer ends quickly. ``ConnOptions``: all the
keyword options of ``BrokerConnection``.
"""

from __future__ import annotations

from typing import TypedDict


class DecodeOptions(TypedDict, total=False):
    verify_crc: bool
    max_decompressed_size: int
    stop_at: int | None


class Retry(TypedDict, total=False):
    timeout: float
    retries: int
    backoff: float


class ConnOptions(Retry, total=False):
    buffer_size: int
    broker_id: int | None


FAST: Retry = {"timeout": 2.0, "retries": 1, "backoff": 0.01}
