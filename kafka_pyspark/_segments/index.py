"""Where to start reading a ``.log`` file for the rows at or after an offset (driver side):
its offset index (``%020d.index``, layout in :mod:`kafka_pyspark._formats.batch_layout`).

The index is sparse (an entry per ~4 KiB of log), may be preallocated with a zero tail, and
has no checksum, so nothing in it is trusted: a binary search over its entries (one 8-byte
read each) proposes the position of the last entry whose offset is at or below the wanted one,
and that position is used only if a whole entry starts there (read and decoded, CRC checked)
whose first 8 bytes (the entry's offset: v2 baseOffset, v0/v1 the last inner offset) are at or
below the wanted offset. Offsets only grow along a log file, so every entry before it holds
smaller offsets only. Otherwise (no index, an index that does not match the file, an entry
larger than :data:`MAX_CHECKED_ENTRY`) the file is read from its start, as without a filter.
"""

from __future__ import annotations

import logging

import pyarrow.fs as pafs

from kafka_pyspark._formats import decode_log
from kafka_pyspark._formats.batch_layout import ENTRY_HEADER, MAX_ENTRY_SIZE, OFFSET_INDEX_ENTRY
from kafka_pyspark._segments.file_names import index_path
from kafka_pyspark._segments.files import SegmentFile
from kafka_pyspark.errors import MessageError

log = logging.getLogger(__name__)

MAX_CHECKED_ENTRY = 64 << 20  # an entry larger than this is not read on the driver to check it
_ENTRY = OFFSET_INDEX_ENTRY.size


def start_position(fs: pafs.FileSystem, f: SegmentFile, low: int) -> int:
    """A position of ``f`` where an entry starts and before which every offset is below
    ``low``; 0 when the index cannot say (see the module docstring)."""
    if f.kind != "log" or low <= f.base_offset:
        return 0
    try:
        with fs.open_input_file(index_path(f.path)) as idx:
            position = _lookup(idx, low - f.base_offset)
        if position <= 0 or position >= f.size:
            return 0
        with fs.open_input_file(f.path) as src:
            if _entry_fits(src, position, low):
                return position
    except OSError:  # no index (FileNotFoundError), or unreadable: read from the start
        return 0
    log.info("kafka07: %s: its offset index does not match the file; reading it from its start",
             index_path(f.path))
    return 0


def _entry(idx: pafs.NativeFile, i: int) -> tuple[int, int]:
    data = idx.read_at(_ENTRY, i * _ENTRY)
    if len(data) < _ENTRY:
        return 0, 0
    relative, position = OFFSET_INDEX_ENTRY.unpack(data)
    return relative, position


def _lookup(idx: pafs.NativeFile, relative: int) -> int:
    """The position of the last index entry whose relative offset is at or below
    ``relative``, among the entries before the zero tail; 0 if none."""
    lo, hi = 0, idx.size() // _ENTRY
    while lo < hi:  # entries [0, lo) are filled, [hi, n) zero: the tail starts at lo
        mid = (lo + hi) // 2
        if _entry(idx, mid) == (0, 0):
            hi = mid
        else:
            lo = mid + 1
    filled, lo, found = lo, 0, 0
    hi = filled
    while lo < hi:
        mid = (lo + hi) // 2
        at, position = _entry(idx, mid)
        if at <= relative:
            found, lo = position, mid + 1
        else:
            hi = mid
    return found


def _entry_fits(src: pafs.NativeFile, position: int, low: int) -> bool:
    """Whether a whole, intact entry starts at ``position`` with an offset at or below
    ``low``."""
    head = src.read_at(ENTRY_HEADER.size, position)
    if len(head) < ENTRY_HEADER.size:
        return False
    offset, size = ENTRY_HEADER.unpack(head)
    if offset > low or size <= 0 or size > min(MAX_ENTRY_SIZE, MAX_CHECKED_ENTRY):
        return False
    data = src.read_at(ENTRY_HEADER.size + size, position)
    try:
        chunk = decode_log(data, position, verify_crc=True)
    except MessageError:
        return False
    return chunk.entries == 1 and chunk.bytes_consumed == len(data)
