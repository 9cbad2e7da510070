"""Segment-file log storage of the embedded Kafka 0.7 broker. Pure file I/O: no sockets.

Layout (docs/dev/PROTOCOL.md "Segment files")::

    <log_dir>/<topic>-<partition>/<20-digit zero-padded base offset>.kafka

A segment file holds whole messages back to back, exactly the bytes a producer sent::

    int32 LENGTH | int8 MAGIC | [int8 ATTRIBUTES if MAGIC == 1] | int32 CRC32(PAYLOAD) | PAYLOAD

Offsets are byte positions in the partition's stream: a segment named N holds offsets
``N .. N + size - 1`` and the next segment is named ``N + size``.

Rules kept from Kafka 0.7.2 (``kafka.log.Log``, ``kafka.message.FileMessageSet``):

- Appends go to the last segment. Before an append, when the last segment's size is *over*
  ``max_segment_size`` (strictly greater, as 0.7.2's ``maybeRoll``), the log rolls to a new
  segment named by the current end. A message set is never split across files, so segments
  end up slightly larger than the limit.
- Readers see only *flushed* bytes (0.7.2's ``highWaterMark``): an append counts its messages
  and flushes once ``flush_interval`` messages are unflushed; the broker also flushes on a
  timer. A roll flushes the old segment first.
- A read never crosses a segment boundary and never checks message boundaries.
- Recovery (on open): the last segment is walked message by message (4-byte length, then a
  CRC32 check of the payload); the file is truncated after the last valid message. Earlier
  segments must be contiguous (``start + size == next start``) or opening fails.
- ``offsets_before`` is 0.7.2's ``getOffsetsBefore``: segment starts paired with the files'
  modification times, plus (when the last segment is non-empty) the flushed end paired with
  "now"; the newest entry whose time is <= TIME and every entry before it, newest first.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka_pyspark._messages.layout import LENGTH, MAGIC_OFFSET, MIN_LENGTH, MIN_LENGTH_BY_MAGIC

# file naming has one definition (kafka_pyspark._segments.file_names), re-exported here
from kafka_pyspark._segments.file_names import SEGMENT_NAME_DIGITS as SEGMENT_NAME_DIGITS
from kafka_pyspark._segments.file_names import SEGMENT_SUFFIX as SEGMENT_SUFFIX
from kafka_pyspark._segments.file_names import parse_partition_dir_name as parse_partition_dir_name
from kafka_pyspark._segments.file_names import parse_segment_file_name as parse_segment_file_name
from kafka_pyspark._segments.file_names import partition_dir_name as partition_dir_name
from kafka_pyspark._segments.file_names import segment_file_name as segment_file_name
from kafka_pyspark._wire.protocol import OFFSETS_EARLIEST, OFFSETS_LATEST
from kafka_pyspark.errors import KafkaError, OffsetOutOfRangeError

log = logging.getLogger(__name__)


_LENGTH = LENGTH  # int32 LENGTH: bytes of the message after this field
_CRC = struct.Struct(">I")  # uint32 CRC32 of the payload
_MAGIC_AT = MAGIC_OFFSET  # int8 MAGIC right after LENGTH
_CRC_AT = {0: 5, 1: 6}  # magic -> position of CRC (magic 1 has an ATTRIBUTES byte first)
_HEADER = MIN_LENGTH_BY_MAGIC  # magic -> bytes of MAGIC [+ ATTRIBUTES] + CRC (LENGTH excluded)
MIN_MESSAGE_LENGTH = MIN_LENGTH  # 0.7.2 Message.MinHeaderSize: a LENGTH below this is corrupt
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # 0.7.2 KafkaServer's "skip recovery" marker


class LogStorageError(KafkaError):
    """The on-disk log cannot be opened (e.g. segments that do not line up)."""


def valid_prefix(data: bytes | memoryview | mmap.mmap) -> int:
    """Bytes of ``data`` made of whole messages with a good CRC (0.7.2 recovery's walk).

    Walks LENGTH fields; stops at a length below the minimum header, a message running past
    the end, an unknown magic byte, or a CRC mismatch. Compressed wrappers are checked
    shallowly (the CRC covers the compressed payload), as 0.7.2 did.
    """
    view = memoryview(data)
    end = len(view)
    pos = 0
    while pos + 4 <= end:
        (length,) = _LENGTH.unpack_from(view, pos)
        if length < MIN_MESSAGE_LENGTH or pos + 4 + length > end:
            break
        magic = view[pos + _MAGIC_AT]
        header = _HEADER.get(magic)
        if header is None or length < header:
            break
        (crc,) = _CRC.unpack_from(view, pos + _CRC_AT[magic])
        if zlib.crc32(view[pos + 4 + header : pos + 4 + length]) != crc:
            break
        pos += 4 + length
    return pos


def recover_segment(path: Path) -> int:
    """Truncate ``path`` after its last valid message; return the bytes dropped."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        valid = valid_prefix(m)
    if valid < size:
        os.truncate(path, valid)
    return size - valid


class Segment:
    """One segment file. ``size`` is the bytes written (flushed or not)."""

    __slots__ = ("path", "size", "start")

    def __init__(self, path: Path, start: int, size: int) -> None:
        self.path = path
        self.start = start
        self.size = size

    def mtime_ms(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except OSError:
            return 0  # as java.io.File.lastModified for a missing file

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, start={self.start}, size={self.size})"


@dataclass(frozen=True)
class ReadSlice:
    """Bytes a FETCH serves: ``length`` bytes of ``segment``'s file from ``position``.

    ``length`` is negative only for a negative FETCH max size (0.7.2 then sends a header
    announcing it and drops the connection).
    """

    segment: Segment
    position: int
    length: int

    def open(self) -> int:
        """A new read-only descriptor of the segment file; the caller closes it."""
        return os.open(self.segment.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def read(self) -> bytes:
        """The slice's bytes (for tests and tools; the broker sends with ``sendfile``)."""
        fd = self.open()
        try:
            return os.pread(fd, max(0, self.length), self.position)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class _View:
    """What readers see, replaced as a whole (copy-on-write): segments and the flushed end."""

    segments: tuple[Segment, ...]
    end: int  # absolute flushed end (0.7.2 "high water mark" of the last segment + its start)


class PartitionLog:
    """The append-only log of one topic-partition: a directory of segment files."""

    def __init__(
        self,
        directory: Path,
        *,
        max_segment_size: int,
        flush_interval: int = 1,
        fsync: bool = False,
        recover: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = Path(directory)
        parsed = parse_partition_dir_name(self.directory.name)
        if parsed is None:
            raise LogStorageError(f"{self.directory} is not a <topic>-<partition> directory")
        self.topic, self.partition = parsed
        self._max_segment_size = max_segment_size
        self._flush_interval = max(1, flush_interval)
        self._fsync = fsync
        self._clock = clock
        self._lock = threading.Lock()
        self._unflushed_messages = 0
        self._last_flush = clock()
        self._closed = False
        self.recovered_bytes = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        segments = self._load(recover)
        last = segments[-1]
        self._append_fd = self._open_append(last.path)
        self._view = _View(tuple(segments), last.start + last.size)

    # --- opening ---------------------------------------------------------------------------

    def _load(self, recover: bool) -> list[Segment]:
        found: list[Segment] = []
        for entry in os.scandir(self.directory):
            start = parse_segment_file_name(entry.name)
            if start is None or not entry.is_file():
                continue
            found.append(Segment(Path(entry.path), start, entry.stat().st_size))
        if not found:
            path = self.directory / segment_file_name(0)
            path.touch()
            return [Segment(path, 0, 0)]
        found.sort(key=lambda s: s.start)
        for cur, nxt in itertools.pairwise(found):
            if cur.start + cur.size != nxt.start:
                raise LogStorageError(
                    f"segments of {self.directory} do not line up: {cur.path.name} "
                    f"({cur.size} bytes) is followed by {nxt.path.name}"
                )
        last = found[-1]
        if recover:
            dropped = recover_segment(last.path)
            if dropped:
                log.warning(
                    "recovery: truncated %d bytes of torn/corrupt tail from %s",
                    dropped,
                    last.path,
                )
            self.recovered_bytes = dropped
            last.size = last.path.stat().st_size
        return found

    @staticmethod
    def _open_append(path: Path) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        return os.open(path, flags, 0o644)

    # --- writing ---------------------------------------------------------------------------

    def append(self, data: bytes | memoryview, message_count: int) -> int:
        """Append whole, already validated messages; return the offset they were written at.

        ``message_count`` (inner messages included) drives the flush interval; an append of
        bytes that holds no message (an empty compressed wrapper) counts as one.
        """
        with self._lock:
            self._check_open()
            last = self._view.segments[-1]
            if last.size > self._max_segment_size:
                self._roll()
                last = self._view.segments[-1]
            at = last.start + last.size
            if len(data):
                self._write_all(data)
                last.size += len(data)
                self._unflushed_messages += max(1, message_count)
            if self._unflushed_messages >= self._flush_interval:
                self._flush_locked()
            return at

    def _write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._append_fd, view)
            view = view[n:]

    def _roll(self) -> None:
        self._flush_locked()
        old = self._view.segments[-1]
        start = old.start + old.size
        path = self.directory / segment_file_name(start)
        if path.exists():
            log.warning("newly rolled segment %s already exists; deleting it first", path)
            path.unlink()
        path.touch()
        new_fd = self._open_append(path)
        os.close(self._append_fd)
        self._append_fd = new_fd
        self._view = _View((*self._view.segments, Segment(path, start, 0)), start)
        log.debug("rolled %s to %s", self.directory.name, path.name)

    def flush(self) -> None:
        """Make every appended byte visible to readers."""
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def flush_if_older(self, max_age: float) -> None:
        """Flush if there is unflushed data and the last flush is ``max_age`` seconds old."""
        with self._lock:
            if self._closed or self._clock() - self._last_flush < max_age:
                return
            self._flush_locked()

    def _flush_locked(self) -> None:
        view = self._view
        last = view.segments[-1]
        written_end = last.start + last.size
        if written_end != view.end:
            if self._fsync:
                os.fsync(self._append_fd)
            self._view = _View(view.segments, written_end)
        self._unflushed_messages = 0
        self._last_flush = self._clock()

    def close(self) -> None:
        """Flush and close every file (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._closed = True
            os.close(self._append_fd)

    def _check_open(self) -> None:
        if self._closed:
            raise LogStorageError(f"log {self.directory.name} is closed")

    # --- reading ---------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """The flushed log end: the offset the next message will get once flushed."""
        return self._view.end

    @property
    def written_end(self) -> int:
        """The end including appended but not yet flushed bytes."""
        last = self._view.segments[-1]
        return last.start + last.size

    @property
    def start(self) -> int:
        return self._view.segments[0].start

    def segments(self) -> tuple[Segment, ...]:
        return self._view.segments

    def read(self, offset: int, max_size: int) -> ReadSlice | None:
        """Where FETCH(offset, max_size) reads from: None for an empty set.

        Raises :class:`OffsetOutOfRangeError` below the first segment or past the flushed end
        (exactly the end is an empty set). Up to ``max_size`` bytes from ``offset`` within one
        segment; no message boundary is checked (0.7.2 ``Log.read``).
        """
        view = self._view
        segs = view.segments
        if offset < segs[0].start or offset > view.end:
            raise OffsetOutOfRangeError(f"offset {offset} is out of range")
        if offset == view.end:
            return None
        lo, hi = 0, len(segs) - 1
        while lo < hi:  # the last segment whose start <= offset
            mid = (lo + hi + 1) // 2
            if segs[mid].start <= offset:
                lo = mid
            else:
                hi = mid - 1
        seg = segs[lo]
        seg_end = min(seg.start + seg.size, view.end)
        if offset >= seg_end:  # pragma: no cover - contiguous segments make this impossible
            return None
        length = min(offset + max_size, seg_end) - offset
        return ReadSlice(seg, offset - seg.start, length)

    def offsets_before(self, time_ms: int, max_number: int) -> list[int]:
        """0.7.2 ``Log.getOffsetsBefore`` (OFFSETS on an existing log).

        Raises ``ValueError`` for a negative ``max_number`` where 0.7.2 failed the request.
        """
        view = self._view
        segs = view.segments
        entries = [(s.start, s.mtime_ms()) for s in segs]
        if view.end > segs[-1].start:
            entries.append((view.end, int(self._clock() * 1000)))
        if time_ms == OFFSETS_LATEST:
            index = len(entries) - 1
        elif time_ms == OFFSETS_EARLIEST:
            index = 0
        else:
            index = len(entries) - 1
            while index >= 0 and entries[index][1] > time_ms:
                index -= 1
        count = min(max_number, index + 1)
        if count < 0:
            raise ValueError(f"negative OFFSETS max number {max_number}")
        return [entries[index - j][0] for j in range(count)]


class LogStore:
    """Every partition log under one log directory, by topic and partition."""

    def __init__(
        self,
        log_dir: Path,
        *,
        max_segment_size: int,
        flush_interval: int = 1,
        fsync: bool = False,
        recover: bool = True,
    ) -> None:
        self.log_dir = Path(log_dir)
        self._max_segment_size = max_segment_size
        self._flush_interval = flush_interval
        self._fsync = fsync
        self._lock = threading.Lock()
        self._logs: dict[str, dict[int, PartitionLog]] = {}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for entry in sorted(os.scandir(self.log_dir), key=lambda e: e.name):
            if entry.name == CLEAN_SHUTDOWN_FILE:
                # a real 0.7.2 broker's marker; it deletes it at start too (we always recover)
                os.unlink(entry.path)
                continue
            if not entry.is_dir():
                log.warning("skipping unexplainable file %s in the log directory", entry.path)
                continue
            parsed = parse_partition_dir_name(entry.name)
            if parsed is None:
                log.warning("skipping %s: not a <topic>-<partition> directory", entry.path)
                continue
            topic, partition = parsed
            plog = self._new_log(Path(entry.path), recover)
            self._logs.setdefault(topic, {})[partition] = plog

    def _new_log(self, directory: Path, recover: bool) -> PartitionLog:
        return PartitionLog(
            directory,
            max_segment_size=self._max_segment_size,
            flush_interval=self._flush_interval,
            fsync=self._fsync,
            recover=recover,
        )

    def topics(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        parts = self._logs.get(topic)
        return None if parts is None else parts.get(partition)

    def get_or_create(self, topic: str, partition: int) -> tuple[PartitionLog, bool]:
        """The log of ``topic``-``partition``, created if needed; True if the topic is new."""
        plog = self.get(topic, partition)
        if plog is not None:
            return plog, False
        with self._lock:
            parts = self._logs.get(topic)
            new_topic = parts is None
            plog = None if parts is None else parts.get(partition)
            if plog is None:
                directory = self.log_dir / partition_dir_name(topic, partition)
                plog = self._new_log(directory, recover=True)
                if parts is None:
                    self._logs[topic] = {partition: plog}
                else:
                    parts[partition] = plog
            return plog, new_topic

    def __iter__(self) -> Iterator[PartitionLog]:
        with self._lock:
            logs = [p for parts in self._logs.values() for p in parts.values()]
        return iter(logs)

    def flush_all(self, older_than: float | None = None) -> None:
        for plog in self:
            if older_than is None:
                plog.flush()
            else:
                plog.flush_if_older(older_than)

    def close(self) -> None:
        for plog in self:
            plog.close()
