"""Finding segment files (driver side): a log directory, a partition directory or one file,
on the local filesystem or anything ``pyarrow.fs`` opens; and cutting large files at entry
boundaries found by a header-only walk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow.fs as pafs

from kafka_pyspark._formats.batch_layout import ENTRY_HEADER, MAX_ENTRY_SIZE, MIN_MESSAGE_SIZE
from kafka_pyspark._messages import scan_boundaries
from kafka_pyspark._messages.layout import LENGTH, MAX_MESSAGE_LENGTH, MIN_LENGTH
from kafka_pyspark._segments.file_names import (
    SegmentKind,
    is_segment_shaped,
    parse_any_segment_name,
    parse_partition_dir_name,
    partition_dir_problem,
    segment_name_problem,
)
from kafka_pyspark._wire.protocol import INT64_MAX
from kafka_pyspark.errors import MessageError, OptionError, SegmentFileError, SegmentPathError

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
    name = _base_name(directory)
    problem = partition_dir_problem(name)
    if problem:
        raise SegmentPathError(directory, f"not a partition directory: {problem}")
    parsed = parse_partition_dir_name(name)
    if parsed is None:
        raise OptionError(
            "path",
            f"{option_path!r}: the directory {name!r} holding segment files is "
            "not named topic-partition (e.g. events-0), so topic and partition are unknown",
        )
    return parsed


def _segment(info: pafs.FileInfo, topic: str, partition: int) -> SegmentFile | None:
    """The segment file ``info`` is (None: not a segment file); a segment-shaped name outside
    the legal ranges is a :class:`SegmentPathError` naming the file."""
    problem = segment_name_problem(info.base_name)
    parsed = parse_any_segment_name(info.base_name)
    # a .kafka row's offset is the name's byte offset + its position in the file
    if parsed is not None and parsed[1] == "kafka07" and parsed[0] + (info.size or 0) > INT64_MAX:
        problem = f"its offsets (base offset + size) pass {INT64_MAX} (int64)"
    if problem:
        raise SegmentPathError(info.path, f"not a legal segment file: {problem}")
    if parsed is None:
        return None
    return SegmentFile(topic, partition, parsed[0], info.path, info.size or 0, parsed[1])


def _segments_in(
    infos: Iterable[pafs.FileInfo], topic: str, partition: int
) -> list[SegmentFile]:
    out: list[SegmentFile] = []
    for info in infos:
        if info.type == pafs.FileType.File:
            f = _segment(info, topic, partition)
            if f is not None:
                out.append(f)
    return out


def _holds_segments(children: Iterable[pafs.FileInfo]) -> bool:
    return any(c.type == pafs.FileType.File and is_segment_shaped(c.base_name) for c in children)


def discover(fs: pafs.FileSystem, path: str, option_path: str | None = None) -> list[SegmentFile]:
    """Every segment file under ``path``, sorted by (topic, partition, base offset).

    ``path`` is one segment file (its directory names topic and partition), a partition
    directory (``topic-partition`` holding segment files), or a log directory (whose
    ``topic-partition`` subdirectories hold them). Other files are ignored. A segment file or
    partition directory named outside the legal ranges (partition ids are int32, base offsets
    int64 and not negative) is a :class:`SegmentPathError` naming it.
    """
    shown = option_path or path
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise OptionError("path", f"{shown!r} does not exist")
        if info.type == pafs.FileType.File:
            if not is_segment_shaped(info.base_name):
                raise OptionError("path", f"{shown!r} is not a segment file "
                                  "(%020d.kafka or %020d.log)")
            found = _segment(info, *_partition_of(shown, _parent(info.path)))
            return [found] if found is not None else []
        children = fs.get_file_info(pafs.FileSelector(path))
        files: list[SegmentFile] = []
        if _holds_segments(children):
            files = _segments_in(children, *_partition_of(shown, path))
        else:
            for child in children:
                tp = parse_partition_dir_name(child.base_name)
                bad = tp is None and partition_dir_problem(child.base_name)
                if child.type != pafs.FileType.Directory or not (tp or bad):
                    continue
                inside = fs.get_file_info(pafs.FileSelector(child.path))
                if tp is not None:
                    files.extend(_segments_in(inside, *tp))
                elif _holds_segments(inside):
                    _partition_of(shown, child.path)  # raises, naming the directory
    except OSError as e:
        raise OptionError("path", f"cannot list {shown!r}: {e}") from e
    if not files:
        raise OptionError("path", f"{shown!r} holds no segment files (%020d.kafka or "
                          "%020d.log, directly or in topic-partition directories)")
    return sorted(files)


def _identity(fs: pafs.FileSystem, path: str) -> tuple[int, object]:
    """One file or directory, however it was reached. A local one is its device and inode (a
    symlink, a hard link, a bind mount or another spelling on a case-insensitive disk is the
    same file); anywhere else its path, on ``fs``, which :func:`discover_paths` made the one
    object of all the equal filesystems (the same S3 endpoint, the same HDFS namenode)."""
    if fs.type_name != "local":
        return id(fs), path.rstrip("/")
    try:
        st = os.stat(path)
    except OSError as e:
        raise OptionError("path", f"cannot read {path!r}: {e.strerror}") from e
    return id(fs), (st.st_dev, st.st_ino)


def _canonical(fs: pafs.FileSystem, known: list[pafs.FileSystem]) -> pafs.FileSystem:
    """The filesystem of ``known`` equal to ``fs`` (same kind and options), else ``fs``, added
    to ``known`` (a handful: one per endpoint the paths name)."""
    for other in known:
        if other.equals(fs):
            return other
    known.append(fs)
    return fs


def discover_paths(paths: Sequence[str]) -> list[tuple[pafs.FileSystem, SegmentFile]]:
    """Every segment file under every path (:func:`discover`), each once however the paths
    overlap (the same path twice, a directory and a file or directory inside it, a link),
    sorted by (topic, partition, base offset). Files of two filesystems (two S3 endpoints, two
    HDFS namenodes) are two files, whatever their paths."""
    return discover_opened((*open_filesystem(path), path) for path in paths)


def discover_opened(
    opened: Iterable[tuple[pafs.FileSystem, str, str]],
) -> list[tuple[pafs.FileSystem, SegmentFile]]:
    """:func:`discover_paths` of paths already opened: ``(filesystem, path inside it, path as
    the user gave it)``."""
    known: list[pafs.FileSystem] = []
    seen: dict[tuple[int, object], tuple[pafs.FileSystem, SegmentFile]] = {}
    for fs_given, inner, shown in opened:
        fs = _canonical(fs_given, known)
        for f in discover(fs, inner, shown):
            seen.setdefault(_identity(fs, f.path), (fs, f))
    return sorted(seen.values(), key=lambda found: found[1])


def check_one_log(files: Sequence[tuple[pafs.FileSystem, SegmentFile]]) -> None:
    """The files of one partition (as :func:`discover_paths` found them) form one log: one
    directory, one format. Otherwise rows' (topic, broker, partition, offset, inner_index)
    would collide (two directories: two brokers' copies, or two copies of one; ``.kafka`` byte
    offsets and ``.log`` logical offsets overlap). Raises :class:`SegmentPathError` naming
    both directories or files."""
    first_fs, first = files[0]
    home = _identity(first_fs, _parent(first.path))
    for fs, f in files[1:]:
        elsewhere = _parent(f.path) != _parent(first.path) or fs is not first_fs
        if elsewhere and _identity(fs, _parent(f.path)) != home:  # stat only another spelling
            raise SegmentPathError(
                _parent(first.path),
                f"partition {f.partition} of topic {f.topic} is also in {_parent(f.path)}: "
                "read each copy on its own (with its broker option) and union the results",
            )
    kinds: dict[SegmentKind, SegmentFile] = {}
    for _, f in files:
        kinds.setdefault(f.kind, f)  # the first file of each format
    if len(kinds) > 1:
        old, new = kinds["kafka07"], kinds["log"]
        raise SegmentPathError(
            _parent(first.path),
            f"holds both Kafka 0.7 and later segment files ({_base_name(old.path)} and "
            f"{_base_name(new.path)}), whose offsets overlap: move one format's files to a "
            "directory of their own (with a broker option of their own) and read it separately",
        )


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
