"""Finding segment files (driver side): a log directory, a partition directory or one file,
on the local filesystem or anything ``pyarrow.fs`` opens; and cutting large files at entry
boundaries found by a header-only walk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow.fs as pafs

from kafka_pyspark.errors import MessageError, OptionError, SegmentFileError
from kafka_pyspark.formats.layout import ENTRY_HEADER, MAX_ENTRY_SIZE, MIN_MESSAGE_SIZE
from kafka_pyspark.messages import scan_boundaries
from kafka_pyspark.messages.layout import LENGTH, MAX_MESSAGE_LENGTH, MIN_LENGTH
from kafka_pyspark.segments.names import (
    SegmentKind,
    parse_any_segment_name,
    parse_partition_dir_name,
)

#: bytes read per window by the header-only walk that finds cut points (.log: one jump per
#: entry; .kafka: all message starts of a chunk at once)
SCAN_WINDOW = 64 << 10
SCAN_CHUNK = 8 << 20
_MIN_LOG_ENTRY = min(MIN_MESSAGE_SIZE.values())


@dataclass(frozen=True, order=True)
class SegmentFile:
    """One segment file: ``path`` inside its filesystem, its size when listed."""

    topic: str
    partition: int
    base_offset: int
    path: str
    size: int
    kind: SegmentKind


def open_filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path inside it: a URI (``file://``, ``s3://``, ``hdfs://``, ...)
    through ``pyarrow.fs.FileSystem.from_uri``, anything else as a local path."""
    if "://" in path:
        try:
            fs, inner = pafs.FileSystem.from_uri(path)
        except (ValueError, OSError) as e:  # ArrowInvalid is a ValueError
            raise OptionError("path", f"cannot open {path!r}: {e}") from e
        return fs, inner
    return pafs.LocalFileSystem(), os.path.abspath(path)


def _base_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0]


def _partition_of(option_path: str, directory: str) -> tuple[str, int]:
    parsed = parse_partition_dir_name(_base_name(directory))
    if parsed is None:
        raise OptionError(
            "path",
            f"{option_path!r}: the directory {_base_name(directory)!r} holding segment files is "
            "not named topic-partition (e.g. events-0), so topic and partition are unknown",
        )
    return parsed


def _segments_in(
    infos: Iterable[pafs.FileInfo], topic: str, partition: int
) -> list[SegmentFile]:
    out: list[SegmentFile] = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        parsed = parse_any_segment_name(info.base_name)
        if parsed is not None:
            out.append(SegmentFile(topic, partition, parsed[0], info.path, info.size or 0,
                                   parsed[1]))
    return out


def discover(fs: pafs.FileSystem, path: str, option_path: str | None = None) -> list[SegmentFile]:
    """Every segment file under ``path``, sorted by (topic, partition, base offset).

    ``path`` is one segment file (its directory names topic and partition), a partition
    directory (``topic-partition`` holding segment files), or a log directory (whose
    ``topic-partition`` subdirectories hold them). Other files are ignored.
    """
    shown = option_path or path
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise OptionError("path", f"{shown!r} does not exist")
        if info.type == pafs.FileType.File:
            parsed = parse_any_segment_name(info.base_name)
            if parsed is None:
                raise OptionError("path", f"{shown!r} is not a segment file "
                                  "(%020d.kafka or %020d.log)")
            topic, partition = _partition_of(shown, _parent(info.path))
            return [SegmentFile(topic, partition, parsed[0], info.path, info.size or 0,
                                parsed[1])]
        children = fs.get_file_info(pafs.FileSelector(path))
        files: list[SegmentFile] = []
        if any(c.type == pafs.FileType.File and parse_any_segment_name(c.base_name)
               for c in children):
            files = _segments_in(children, *_partition_of(shown, path))
        else:
            for child in children:
                tp = parse_partition_dir_name(child.base_name)
                if child.type == pafs.FileType.Directory and tp is not None:
                    files.extend(_segments_in(fs.get_file_info(pafs.FileSelector(child.path)),
                                              *tp))
    except OSError as e:
        raise OptionError("path", f"cannot list {shown!r}: {e}") from e
    if not files:
        raise OptionError("path", f"{shown!r} holds no segment files (%020d.kafka or "
                          "%020d.log, directly or in topic-partition directories)")
    return sorted(files)


def _entry_size(kind: SegmentKind, window: bytes, i: int) -> int | None:
    if kind == "kafka07":
        (length,) = LENGTH.unpack_from(window, i)
        ok = MIN_LENGTH <= length <= MAX_MESSAGE_LENGTH
        return LENGTH.size + length if ok else None
    _, size = ENTRY_HEADER.unpack_from(window, i)
    return ENTRY_HEADER.size + size if _MIN_LOG_ENTRY <= size <= MAX_ENTRY_SIZE else None


def _cuts_07(src: pafs.NativeFile, size: int, max_bytes: int, chunk: int) -> list[int]:
    """0.7 files hold many small messages: their starts come from the vectorised
    ``messages.scan_boundaries``, ``chunk`` bytes at a time."""
    cuts: list[int] = []
    pos, target = 0, max_bytes
    while target < size:
        window = src.read_at(chunk, pos)
        try:
            starts, end = scan_boundaries(window, pos)
        except MessageError:
            break
        if end == pos:  # one message larger than the window: step over it by its length
            step = _entry_size("kafka07", window, 0) if len(window) >= LENGTH.size else None
            if step is None or pos + step >= size:
                break
            starts, end = np.asarray([pos], dtype=np.int64), pos + step
        i = int(np.searchsorted(starts, target))
        while i < len(starts):
            cuts.append(int(starts[i]))
            target = cuts[-1] + max_bytes
            i = int(np.searchsorted(starts, target))
        pos = end
    return cuts


def cut_points(
    fs: pafs.FileSystem, f: SegmentFile, max_bytes: int, *, chunk: int = SCAN_CHUNK
) -> list[int]:
    """Positions inside ``f`` where an entry starts, about ``max_bytes`` apart: reads only the
    length fields, one window at a time. An impossible length (corruption) ends the walk:
    the rest of the file stays in the last piece, where reading reports it."""
    if f.size <= max_bytes:
        return []
    need = LENGTH.size if f.kind == "kafka07" else ENTRY_HEADER.size
    cuts: list[int] = []
    pos, target = 0, max_bytes
    start, window = 0, b""
    try:
        with fs.open_input_file(f.path) as src:
            if f.kind == "kafka07":
                return [c for c in _cuts_07(src, f.size, max_bytes, chunk) if 0 < c < f.size]
            while target < f.size:
                if pos >= target:
                    cuts.append(pos)
                    target = pos + max_bytes
                    continue
                if pos + need > start + len(window):
                    start, window = pos, src.read_at(SCAN_WINDOW, pos)
                    if len(window) < need:
                        break
                size = _entry_size(f.kind, window, pos - start)
                if size is None:
                    break
                pos += size
    except OSError as e:
        raise SegmentFileError(f.path, pos, f"cannot read: {e}") from e
    return [c for c in cuts if 0 < c < f.size]
