"""Which transactional batches were aborted, from the control markers in the log itself.

A transaction of producer P ends with exactly one control record (commit or abort) written
after all of its data: so a transactional batch of P ending at offset L was aborted iff the
first marker of P at an offset above L is an abort. :class:`TxnResolver` finds that marker by
walking forward from where the reading task started, through the rest of its file and then
the partition's later files, reading entry headers only (one small read per entry) and
decoding only control batches. It walks only as far as a question needs, once per task.

Not decidable here: a batch whose marker is not in the files read (the archive ends inside
the transaction, or later segments are missing): :meth:`TxnResolver.aborted` answers None
and the reader returns such rows with a warning. ``.txnindex`` files are not needed.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import pyarrow.fs as pafs

from kafka_pyspark._formats import decode_log
from kafka_pyspark._formats.batch_layout import (
    BATCH_CONTROL,
    BATCH_CRC_START,
    ENTRY_HEADER,
    ENTRY_PREFIX_SIZE,
    MAGIC_POSITION,
    MAGIC_V2,
)
from kafka_pyspark._segments.files import SegmentFile
from kafka_pyspark.errors import MessageError, SegmentFileError

_HEAD = BATCH_CRC_START + 2  # bytes of a batch up to and including its attributes


class TxnResolver:
    """Commit/abort markers by producer id, found lazily from ``files[0]`` at ``start``."""

    def __init__(self, fs: pafs.FileSystem, files: Sequence[SegmentFile], start: int) -> None:
        self._fs = fs
        self._files = [f for f in files if f.kind == "log"]
        self._index = 0
        self._pos = start
        self._offsets: dict[int, list[int]] = {}
        self._commits: dict[int, list[bool]] = {}
        self.done = not self._files

    def aborted(self, producer_id: int, last_offset: int) -> bool | None:
        """Whether the transaction holding ``last_offset`` of ``producer_id`` was aborted;
        None when its marker is not in the files."""
        while True:
            offsets = self._offsets.get(producer_id, [])
            i = bisect.bisect_right(offsets, last_offset)
            if i < len(offsets):
                return not self._commits[producer_id][i]
            if self.done:
                return None
            self._advance()

    def _advance(self) -> None:
        """Walk one file (the rest of it) and record its markers."""
        f = self._files[self._index]
        with self._fs.open_input_file(f.path) as src:
            size = src.size()
            pos = self._pos
            while pos + ENTRY_PREFIX_SIZE <= size:
                head = src.read_at(_HEAD, pos)
                if len(head) < ENTRY_PREFIX_SIZE:
                    break
                _, length = ENTRY_HEADER.unpack_from(head, 0)
                total = ENTRY_HEADER.size + length
                if length <= 0 or pos + total > size:
                    break  # a torn tail or corruption: the reading task reports it
                if (head[MAGIC_POSITION] == MAGIC_V2 and len(head) == _HEAD
                        and int.from_bytes(head[BATCH_CRC_START:_HEAD], "big") & BATCH_CONTROL):
                    try:
                        found = decode_log(src.read_at(total, pos), pos).markers
                    except MessageError as e:
                        raise SegmentFileError(f.path, pos, f"control batch: {e}") from e
                    for m in found:
                        self._offsets.setdefault(m.producer_id, []).append(m.offset)
                        self._commits.setdefault(m.producer_id, []).append(m.commit)
                pos += total
        self._index += 1
        self._pos = 0
        self.done = self._index >= len(self._files)
