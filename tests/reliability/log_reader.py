"""An independent reader of Kafka 0.7 logs, for counting what a sink wrote.

It reads a broker's segment files straight from its log directory and decodes them from the
0.7 message layout alone (the "Writing a Driver for Kafka" page; no code of the project's
decode path, wire layer or client is used)::

    int32 LENGTH                      bytes after this field
    int8  MAGIC                       0 (v0.6) or 1 (v0.7)
    int8  COMPRESSION                 only when MAGIC == 1: 0 none, 1 gzip, 2 snappy
    int32 CHECKSUM                    CRC32 of PAYLOAD
    bytes PAYLOAD                     LENGTH - 5 (magic 0) or LENGTH - 6 (magic 1) bytes

A compressed message's payload is the compressed concatenation of whole inner messages in the
same layout (gzip: a gzip stream, read with the standard library). Snappy wrappers are not
read here (the fault suite writes uncompressed or gzip sets); one is reported as an error, as
are a bad checksum, an unknown magic and a message cut short, naming the file and offset.

Files: ``<log dir>/<topic>-<partition>/<20-digit base offset>.kafka``; offsets are byte
positions, so the messages of a partition are the files' bytes back to back in name order.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

SUFFIX = ".kafka"


class LogFormatError(AssertionError):
    """The bytes are not a well-formed 0.7 log (what and where in the message)."""


def messages(data: bytes, where: str = "log") -> Iterator[tuple[int, int, bytes]]:
    """``(offset, compression, payload)`` of each top-level message in ``data``, CRC-checked."""
    pos = 0
    while pos < len(data):
        if len(data) - pos < 4:
            raise LogFormatError(f"{where}: {len(data) - pos} trailing byte(s) at offset {pos}")
        (length,) = struct.unpack_from(">i", data, pos)
        end = pos + 4 + length
        if length < 5 or end > len(data):
            raise LogFormatError(f"{where}: message at offset {pos} has length {length}, "
                                 f"{len(data) - pos - 4} byte(s) left")
        magic = data[pos + 4]
        if magic == 0:
            compression, head = 0, pos + 5
        elif magic == 1 and length >= 6:
            compression, head = data[pos + 5], pos + 6
        else:
            raise LogFormatError(f"{where}: message at offset {pos} has magic {magic} and "
                                 f"length {length}")
        (crc,) = struct.unpack_from(">I", data, head)
        payload = data[head + 4 : end]
        if zlib.crc32(payload) != crc:
            raise LogFormatError(f"{where}: message at offset {pos}: checksum mismatch")
        yield pos, compression, payload
        pos = end


def payloads(data: bytes, where: str = "log") -> Iterator[bytes]:
    """Every inner payload of ``data`` in log order (compressed wrappers opened)."""
    for offset, compression, payload in messages(data, where):
        if compression == 0:
            yield payload
        elif compression == 1:
            inner = gzip.decompress(payload)
            yield from payloads(inner, f"{where}, gzip wrapper at offset {offset}")
        else:
            raise LogFormatError(f"{where}: message at offset {offset} has compression "
                                 f"{compression} (this reader opens none and gzip only)")


def partition_dirs(log_dir: Path, topic: str) -> list[Path]:
    """The partition directories of ``topic`` under a broker's log directory."""
    found = []
    for d in log_dir.iterdir() if log_dir.is_dir() else ():
        name, sep, part = d.name.rpartition("-")
        if sep and name == topic and part.isdigit() and d.is_dir():
            found.append((int(part), d))
    return [d for _, d in sorted(found)]


def partition_bytes(directory: Path) -> bytes:
    """A partition's log, its segment files concatenated in offset order."""
    segments = sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIX))
    return b"".join(p.read_bytes() for p in segments)


def topic_values(log_dirs: Iterable[Path], topic: str) -> dict[str, list[bytes]]:
    """Every value of ``topic`` on the brokers with these log directories, per partition
    directory (``"<log dir name>/<topic>-<p>"``), in log order."""
    out: dict[str, list[bytes]] = {}
    for log_dir in log_dirs:
        for d in partition_dirs(Path(log_dir), topic):
            where = f"{log_dir.name}/{d.name}"
            out[where] = list(payloads(partition_bytes(d), where))
    return out


def count(log_dirs: Iterable[Path], topic: str) -> Counter[bytes]:
    """Every value of ``topic`` as a multiset."""
    return Counter(v for vals in topic_values(log_dirs, topic).values() for v in vals)
