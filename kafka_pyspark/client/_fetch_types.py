"""The two values a read is planned into and the fetcher takes as they are.

:class:`OffsetRange` is ``[start, end)`` of one broker-partition's log; :class:`FetchSettings`
is how the fetcher fetches and decodes. Planning (:mod:`kafka_pyspark._spark.read.planning`)
builds both on the driver (the settings are parsed once, into the read options); every Spark
input partition carries them to its executor, which hands them to
:func:`~kafka_pyspark.client.iter_multi_range` unchanged (as Spark's own ``KafkaInputPartition``
carries its consumer parameters). Both are frozen and hold primitives only; with ``slots`` they
pickle as their values, not as a dict of field names (Spark ships one input partition per task).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.partition_key import TopicPartition, describe_tp

__all__ = ["FetchSettings", "OffsetRange"]


@dataclass(frozen=True, order=True, slots=True)
class OffsetRange:
    """``[start, end)`` of one broker-partition's log (byte offsets): every message whose
    offset is ``start <= offset < end``."""

    topic: str
    broker: int
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.broker, self.partition)

    def describe(self) -> str:
        return f"{describe_tp(self.key)}, offsets [{self.start}, {self.end})"


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """How the fetcher fetches and decodes; the defaults are
    :mod:`kafka_pyspark._shared.defaults`.

    ``fetch_size`` (bytes asked per FETCH), ``max_fetch_size`` (the most a FETCH grows to for
    one large message), ``verify_crc``, ``max_decompressed_size``, ``empty_retries`` (how often
    an empty answer before a range's end is fetched again; None: the connection's ``retries``)
    and ``max_response_size`` (the most one MULTIFETCH asks for; None: ``max_fetch_size``).
    What only a Spark read task uses (its connection, data loss, batch bounds) rides beside
    these on the input partition (:class:`kafka_pyspark._spark.read.planning.TaskSettings`).
    """

    fetch_size: int = defaults.FETCH_SIZE
    max_fetch_size: int = defaults.MAX_FETCH_SIZE
    verify_crc: bool = True
    max_decompressed_size: int = defaults.MAX_DECOMPRESSED_SIZE
    empty_retries: int | None = None
    max_response_size: int | None = None

