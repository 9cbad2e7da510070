"""The columns of a decoded batch (``layout.MESSAGE_SCHEMA``) from the outer messages' records
and the value column: offset, next_offset and the codec come from the outer message each row
belongs to; inner_index is the row's position inside its wrapper."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._messages import walk
from kafka_pyspark._messages.arrays import int_array, string_array
from kafka_pyspark._messages.layout import CODEC_NAMES, LENGTH_SIZE, MESSAGE_SCHEMA

I64 = npt.NDArray[np.int64]

# --- assembly ------------------------------------------------------------------------------

# Constant columns, cached per value (Arrow arrays are immutable: slices are safe to share);
# building the topic column per batch would be a large share of the read. A few values at a time.
_CONSTANTS: dict[str | int, pa.Array] = {}
_CONSTANTS_KEPT = 16
_CONSTANT_ROWS = 1 << 16
_CODEC_STRINGS = string_array([CODEC_NAMES[i] for i in range(len(CODEC_NAMES))])


def constant_column(value: str | int, n: int) -> pa.Array:
    """``n`` rows of ``value`` (a string, or an int32)."""
    cached = _CONSTANTS.get(value)
    if cached is None or len(cached) < n:
        if len(_CONSTANTS) >= _CONSTANTS_KEPT:
            _CONSTANTS.clear()
        size = max(n, _CONSTANT_ROWS)
        if isinstance(value, str):
            raw = value.encode("utf-8")
            offsets = np.arange(0, (size + 1) * len(raw), len(raw), dtype=np.int32)
            cached = pa.Array.from_buffers(
                pa.string(), size, [None, pa.py_buffer(offsets), pa.py_buffer(raw * size)]
            )
        else:
            cached = int_array(np.full(size, value, dtype=np.int32))
        _CONSTANTS[value] = cached
    return cached.slice(0, n)


def _codec_column(code: int, n: int) -> pa.Array:
    return constant_column(CODEC_NAMES[code], n)


def _zeros_column(n: int) -> pa.Array:
    return constant_column(0, n)


def _rank_in_group(keys: I64) -> npt.NDArray[np.int32]:
    """For sorted ``keys``: each element's position among the elements with the same key."""
    n = len(keys)
    first = np.zeros(n, dtype=np.int64)
    if n:
        change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        first[change] = change
    return (np.arange(n, dtype=np.int64) - np.maximum.accumulate(first)).astype(np.int32)


def batch(recs: Any, row_root: I64 | None, values: pa.Array, base: int) -> pa.RecordBatch:
    """The batch of the outer messages ``recs`` (``walk.RECORD``); ``row_root`` is the outer
    message of every row (None: row i is outer i)."""
    offset = recs["start"] + base
    next_offset = offset + LENGTH_SIZE + recs["length"]
    n = len(recs) if row_root is None else len(row_root)
    if row_root is None:
        return pa.RecordBatch.from_arrays(
            [int_array(offset), int_array(next_offset), _zeros_column(n), _codec_column(0, n),
             values],
            schema=MESSAGE_SCHEMA,
        )
    codes = recs["codec"][row_root]
    if n and int(codes.min()) == int(codes.max()):
        codec_column = _codec_column(int(codes[0]), n)
    else:
        codec_column = _CODEC_STRINGS.take(int_array(codes.astype(np.int32)))
    arrays = [int_array(offset[row_root]), int_array(next_offset[row_root]),
              int_array(_rank_in_group(row_root)), codec_column, values]
    return pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)


def wrapped_batch(recs: Any, counts: I64, values: pa.Array, base: int) -> pa.RecordBatch:
    """:func:`batch` for outer wrappers ``recs`` holding ``counts`` rows each, in order."""
    rows = int(counts.sum())
    codes = recs["codec"]
    if int(codes.min()) == int(codes.max()):
        codec_column = _codec_column(int(codes[0]), rows)
    else:
        codec_column = _CODEC_STRINGS.take(int_array(np.repeat(codes.astype(np.int32), counts)))
    if walk.kernel is not None:  # the per-row columns in one pass
        offsets = np.empty(rows, dtype=np.int64)
        nexts = np.empty(rows, dtype=np.int64)
        inner = np.empty(rows, dtype=np.int32)
        walk.kernel.wrapped_rows(recs, counts, base, offsets, nexts, inner)
        return pa.RecordBatch.from_arrays(
            [int_array(offsets), int_array(nexts), int_array(inner), codec_column, values],
            schema=MESSAGE_SCHEMA)
    offset = recs["start"] + base
    first = np.cumsum(counts) - counts
    inner_index = np.arange(rows, dtype=np.int32) - np.repeat(first.astype(np.int32), counts)
    arrays = [int_array(np.repeat(offset, counts)),
              int_array(np.repeat(offset + LENGTH_SIZE + recs["length"], counts)),
              int_array(inner_index), codec_column, values]
    return pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)


def plain_batch(starts: I64, values: pa.Array) -> pa.RecordBatch:
    """The batch of plain outer messages at the absolute offsets ``starts[:-1]`` (the last
    entry: the offset after them), one row each."""
    n = len(starts) - 1
    arrays = [int_array(starts[:n]), int_array(starts[1:]), _zeros_column(n), _codec_column(0, n),
              values]
    return pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)
