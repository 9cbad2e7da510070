"""Row-level helpers shared by the write engine: targets, row errors, Arrow column views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark.errors import KafkaError


class RowError(Exception):
    """Internal: bad data in a row; carries the domain error to report (the task stops)."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


def row_label(task: str, row: int, key: Any = None) -> str:
    """How every error names a row: ``row 12 of <task> (key 'k')``."""
    text = f"row {row} of {task}"
    if key is not None:
        text += f" (key {_short(key)})"
    return text


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Targets:
    """Every (topic, broker, partition) a task writes to, numbered densely in first-use order
    (routing fills arrays of these numbers; buffers and counters are indexed by them)."""

    __slots__ = ("_index", "_keys")

    def __init__(self) -> None:
        self._keys: list[TopicPartition] = []
        self._index: dict[TopicPartition, int] = {}

    def id(self, target: TopicPartition) -> int:
        i = self._index.get(target)
        if i is None:
            i = self._index[target] = len(self._keys)
            self._keys.append(target)
        return i

    def __getitem__(self, i: int) -> TopicPartition:
        return self._keys[i]

    def keys(self) -> Sequence[TopicPartition]:
        """Every target so far, by number (a view: it grows with :meth:`id`)."""
        return self._keys

    def __len__(self) -> int:
        return len(self._keys)


def as_binary(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A string/binary column as ``pa.binary()`` (zero-copy for string/binary)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    if pa.types.is_binary(t):
        return arr
    return arr.cast(pa.binary())


def value_offsets(arr: pa.Array) -> npt.NDArray[np.int64]:
    """Offsets of a ``pa.binary()`` array, rebased so element i is bytes [o[i], o[i+1])."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n + 1, dtype=np.int64)
    offsets = np.frombuffer(buf, dtype=np.int32, count=arr.offset + n + 1)[arr.offset :]
    return offsets.astype(np.int64)


def compact(arr: pa.Array) -> pa.Array:
    """A copy of a (sliced) array holding only its own bytes."""
    return pa.concat_arrays([arr])
