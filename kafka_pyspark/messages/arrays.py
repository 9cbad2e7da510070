"""Arrow arrays from numpy buffers and Python strings, without ``pa.array``.

``pa.array`` (and ``RecordBatch.from_pylist``, ``Schema.empty_table``) import pandas on first
use: about 0.2 CPU-s in every fresh Python worker, which Spark starts without pandas. Wrapping
the numpy buffer also costs less per call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

_ARROW_INTS = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32()}


def int_array(values: npt.NDArray[Any]) -> pa.Array:
    """An int64 or int32 numpy array as an Arrow array of that type, without a copy."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(_ARROW_INTS[values.dtype], len(values),
                                 [None, pa.py_buffer(values)])


def string_array(values: list[str]) -> pa.Array:
    """``values`` as an Arrow string array."""
    raw = [v.encode("utf-8") for v in values]
    ends = np.zeros(len(raw) + 1, dtype=np.int32)
    np.cumsum([len(r) for r in raw], out=ends[1:])
    return pa.Array.from_buffers(pa.string(), len(raw),
                                 [None, pa.py_buffer(ends), pa.py_buffer(b"".join(raw))])
