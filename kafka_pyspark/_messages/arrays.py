"""Arrow arrays from numpy buffers and Python strings, without ``pa.array``.

``pa.array`` (and ``RecordBatch.from_pylist``, ``Schema.empty_table``) import pandas on first
use, a heavy import in every fresh Python worker, which Spark starts without pandas
(docs/dev/ARCHITECTURE.md). Wrapping the numpy buffer also costs less per call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._wire.protocol import INT32_MAX

_ARROW_INTS = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32()}


def int_array(
    values: npt.NDArray[Any],
    valid: npt.NDArray[np.bool_] | None = None,
    kind: pa.DataType | None = None,
) -> pa.Array:
    """An int64 or int32 numpy array as an Arrow array of that type (or of ``kind``, of the
    same width: a timestamp), null where ``valid`` is False; the values without a copy."""
    values = np.ascontiguousarray(values)
    kind = _ARROW_INTS[values.dtype] if kind is None else kind
    if kind.bit_width != 8 * values.dtype.itemsize:
        raise TypeError(f"{values.dtype} values cannot make an Arrow {kind} array")
    bitmap, nulls = _bitmap(valid)
    return pa.Array.from_buffers(kind, len(values), [bitmap, pa.py_buffer(values)],
                                 null_count=nulls)


def bool_array(values: npt.NDArray[np.bool_]) -> pa.Array:
    """A numpy bool array as an Arrow bool array (no nulls)."""
    bits = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def string_array(values: list[str]) -> pa.Array:
    """``values`` as an Arrow string array."""
    return _var_array(pa.string(), [v.encode("utf-8") for v in values], None)


def binary_array(values: list[bytes | None]) -> pa.Array:
    """``values`` as an Arrow binary array, null for ``None``."""
    valid = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
    raw = values if valid.all() else [b"" if v is None else v for v in values]
    return _var_array(pa.binary(), raw, valid)  # type: ignore[arg-type]


def _var_array(kind: pa.DataType, raw: list[bytes], valid: npt.NDArray[np.bool_] | None
               ) -> pa.Array:
    ends = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=ends[1:])
    if ends[-1] > INT32_MAX:  # int32 offsets of string / binary arrays
        raise ValueError(f"{ends[-1]} bytes do not fit one Arrow {kind} array")
    bitmap, nulls = _bitmap(valid)
    return pa.Array.from_buffers(kind, len(raw), [bitmap, pa.py_buffer(ends.astype(np.int32)),
                                                  pa.py_buffer(b"".join(raw))],
                                 null_count=nulls)


def _bitmap(valid: npt.NDArray[np.bool_] | None) -> tuple[pa.Buffer | None, int]:
    """The Arrow validity bitmap of ``valid`` and its count of nulls (no bitmap: none)."""
    if valid is None:
        return None, 0
    nulls = len(valid) - int(np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls
