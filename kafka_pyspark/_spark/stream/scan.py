"""Header-only scans of byte windows of a log: where its messages start, read from their
4-byte lengths alone (no CRC, no decompression). Admission control
(:mod:`kafka_pyspark._spark.stream.admission`) cuts a micro-batch at the boundaries a scan
saw; :func:`scan_window` reads one window's bytes, however they were fetched (the stream
reader's one MULTIFETCH per broker, or the prefetch's)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kafka_pyspark._shared.partition_key import TopicPartition

I64 = npt.NDArray[np.int64]

__all__ = ["HEADER", "Scan", "ScanFn", "Windows", "scan_window"]

HEADER = 4  # int32 LENGTH: all a scan needs to learn a message's size


class Scan:
    """What a header-only scan of one byte window ``[lo, hi)`` of a log found.

    ``boundaries``: every message boundary seen, ascending, starting with ``lo`` (a window
    always starts at a known boundary): the start of each complete message and the end of the
    last one. ``next_size``: full size (4 + LENGTH) of the message starting at
    ``boundaries[-1]``, if its 4-byte length field was inside the window, else ``None``.

    The boundaries are kept as one int64 array (a window of a micro-batch holds hundreds of
    thousands of messages: Python ints per boundary cost more than fetching the window), and
    looked up by binary search.
    """

    __slots__ = ("boundaries", "next_size")

    def __init__(self, boundaries: Sequence[int] | I64, next_size: int | None = None) -> None:
        self.boundaries: I64 = np.asarray(boundaries, dtype=np.int64)
        self.next_size = next_size

    def __repr__(self) -> str:
        b = self.boundaries
        return f"Scan({len(b)} boundaries in [{b[0] if len(b) else '-'}, " \
               f"{b[-1] if len(b) else '-'}], next_size={self.next_size})"

    def size_at(self, offset: int) -> int | None:
        """Size of the message starting at boundary ``offset``, if this scan knows it."""
        b = self.boundaries
        if not len(b) or offset < b[0] or offset > b[-1]:
            return None
        if offset == b[-1]:
            return self.next_size
        i = int(np.searchsorted(b, offset))
        if b[i] != offset:
            return None
        return int(b[i + 1]) - offset

    def last_at_or_before(self, limit: int) -> int | None:
        """The last boundary seen at or before ``limit`` (None if there is none)."""
        i = int(np.searchsorted(self.boundaries, limit, side="right"))
        return int(self.boundaries[i - 1]) if i else None


Windows = Mapping[TopicPartition, tuple[int, int]]
"""``{tp: (lo, hi)}``: byte windows to scan; ``lo`` is a message boundary, ``hi <= latest``."""
ScanFn = Callable[[Windows], Mapping[TopicPartition, Scan]]


def scan_window(data: bytes | memoryview, lo: int) -> Scan:
    """Header-only scan of the bytes of window ``[lo, lo + len(data))`` (no CRC, no
    decompression): :func:`kafka_pyspark._messages.scan_boundaries` plus the size of the
    message after the last complete one when its length field is in the window."""
    from kafka_pyspark._messages import scan_boundaries

    starts, end = scan_boundaries(data, lo)
    bounds = starts
    if not len(bounds) or bounds[-1] != end:
        bounds = np.append(bounds, np.int64(end))
    if bounds[0] != lo:
        bounds = np.insert(bounds, 0, np.int64(lo))
    pos = end - lo
    next_size = None
    if len(data) - pos >= HEADER:
        length = int.from_bytes(bytes(data[pos : pos + HEADER]), "big", signed=True)
        next_size = HEADER + length if length >= 0 else None
    return Scan(bounds, next_size)
