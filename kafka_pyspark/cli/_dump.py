"""``kafka07 dump``: the messages of segment files, directories of them, or a live range.

Reading is :mod:`kafka_pyspark.cli._dump_read`; this module picks what to read, prints each
message (with 0.7's ``DumpLogSegments`` facts) and ends with a summary line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from kafka_pyspark._admin.offsets import live_brokers, registered_partitions
from kafka_pyspark.cli._common import (
    EXIT_DATA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_cluster_args,
    bp,
    broker_connection,
    non_negative_int,
    open_cluster,
    parse_broker_partition,
    positive_int,
    require_live,
)
from kafka_pyspark.cli._dump_read import (
    FILE_READERS,
    DumpItem,
    DumpMessage,
    DumpStop,
    read_live_range,
    read_segment_file,
    segment_base_offset,
)
from kafka_pyspark.cli._output import Progress, error, payload_fields, plural, summary
from kafka_pyspark.cli._resume import (
    Interrupts,
    Position,
    format_position,
    line_writer,
    parse_position,
)

__all__ = ["FILE_READERS", "DumpItem", "DumpMessage", "DumpStop", "read_segment_file"]

#: stdout's buffer (lines are written without blocking while it has room) and how much of it
#: is written out at a time
LINE_BUFFER = 4 << 20
FLUSH_EVERY = 1 << 20

_KINDS = (  # what a path is, when it is not a regular file or a directory
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a segment file"),
    (stat.S_ISCHR, "is a character device, not a segment file"),
    (stat.S_ISBLK, "is a block device, not a segment file"),
    (stat.S_ISSOCK, "is a socket, not a segment file"),
)


def segment_files(path: str) -> list[Path]:
    """The files ``path`` names: itself if a regular file; for a directory, the segment files
    (:data:`FILE_READERS` suffixes) in it and in its subdirectories (a log directory holds
    partition directories), sorted. Anything else is a :class:`CliError` saying what it is."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CliError(f"cannot read segment file {path}: no such file or directory") from None
    except OSError as e:
        raise CliError(f"cannot read segment file {path}: {e.strerror}") from None
    if stat.S_ISREG(mode):
        return [Path(path)]
    if not stat.S_ISDIR(mode):
        why = next((w for test, w in _KINDS if test(mode)), "is not a regular file")
        raise CliError(f"cannot read segment file {path}: {why}")
    top = Path(path)
    try:
        found = [p for p in (*top.iterdir(), *(q for d in top.iterdir() if d.is_dir()
                                               for q in d.iterdir()))
                 if p.suffix in FILE_READERS and p.is_file()]
    except OSError as e:
        raise CliError(f"cannot list directory {e.filename or path}: {e.strerror}") from None
    if not found:
        suffixes = ", ".join(FILE_READERS)
        raise CliError(f"no segment files ({suffixes}) in directory {path} or its subdirectories")
    return sorted(found)


# --- printing ------------------------------------------------------------------------------


@dataclass
class _Tally:
    messages: int = 0
    invalid: int = 0
    code: int = EXIT_OK
    #: stdout: each message's line is written with its position noted, Ctrl-C held meanwhile;
    #: the buffer is written out every :data:`FLUSH_EVERY` bytes, where Ctrl-C may come
    out: BinaryIO = field(default_factory=lambda: line_writer(LINE_BUFFER))
    interrupts: Interrupts = field(default_factory=Interrupts)
    pending: int = 0

    def line(self, text: str) -> None:
        data = text.encode() + b"\n"
        self.out.write(data)
        self.pending += len(data)

    def flush(self, force: bool = False) -> None:
        if force or self.pending >= FLUSH_EVERY:
            self.out.flush()
            self.pending = 0


def _text(m: DumpMessage, values: bool) -> str:
    line = (f"offset={m.offset} next={m.next_offset} inner={m.inner_index} "
            f"codec={m.compression} size={len(m.value)}")
    if m.magic is not None:
        valid = "unchecked" if m.valid is None else str(m.valid).lower()
        line += f" magic={m.magic} crc={m.crc} valid={valid}"
    if m.error is not None:
        line += f" error={m.error!r}"
    line += "".join(f" {k}={v!r}" for k, v in m.extra.items())
    if values:
        line += f" value={m.value!r}"
    return line


def _json(m: DumpMessage, values: bool, where: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {} if where is None else {"file": where}
    doc.update({"offset": m.offset, "next_offset": m.next_offset, "inner_index": m.inner_index,
                "compression": m.compression, "size": len(m.value)})
    if m.magic is not None:
        doc.update({"magic": m.magic, "crc": m.crc, "valid": m.valid})
    if m.error is not None:
        doc["error"] = m.error
    doc.update(m.extra)
    if values:
        doc.update(payload_fields(m.value))
    return doc


def print_items(items: Iterator[DumpItem], args: argparse.Namespace, where: str,
                tally: _Tally, progress: Progress, *, tag: str | None = None,
                begin: Position = (0, 0)) -> None:
    """Print one source's messages within ``--start``/``--end``/``--max-messages``, then its
    line on stderr; counts go into ``tally``. Ctrl-C says where it stopped (``begin`` if
    nothing was shown), as the ``--start`` that resumes there."""
    shown = invalid = 0
    stop: DumpStop | None = None
    start: Position = args.start or (0, 0)
    at = max(begin, start)
    try:
        for item in items:
            if isinstance(item, DumpStop):
                stop = item
                break
            if (item.offset, item.inner_index) < start:
                continue
            if (args.end is not None and item.offset >= args.end) or (
                    args.max_messages is not None and tally.messages >= args.max_messages):
                break
            with tally.interrupts.held():
                shown, tally.messages = shown + 1, tally.messages + 1
                invalid += item.valid is False
                tally.line(json.dumps(_json(item, args.values, tag), separators=(",", ":"))
                           if args.json else _text(item, args.values))
                at = (item.next_offset, 0) if item.compression == "none" else \
                    (item.offset, item.inner_index + 1)
            progress.add(1, len(item.value))
            tally.flush()
        tally.flush(force=True)
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            tally.out.flush()  # the lines taken before Ctrl-C, which the position counts
        progress.clear()
        raise CliError(f"{where}: interrupted after {plural(shown, 'message')}; to resume "
                       f"where it stopped: --start {format_position(at)}",
                       EXIT_INTERRUPTED) from None
    tally.invalid += invalid
    progress.clear()
    _print_stop(stop, args, where, shown, invalid, tally, tag)


def _print_stop(stop: DumpStop | None, args: argparse.Namespace, where: str, shown: int,
                invalid: int, tally: _Tally, tag: str | None) -> None:
    counts = plural(shown, "message") + (f" ({invalid} not valid)" if invalid else "")
    if invalid:
        tally.code = max(tally.code, EXIT_DATA)
    if stop is None:  # --end or --max-messages reached
        summary(f"{where}: {counts}, stopped as asked")
        return
    if args.json:
        doc = {} if tag is None else {"file": tag}
        tally.line(json.dumps({**doc, "stop": stop.kind, "offset": stop.offset,
                               "error": stop.error}, separators=(",", ":")))
        tally.flush(force=True)
    if stop.kind == "end":
        summary(f"{where}: {counts}, end offset {stop.offset}")
        return
    tally.code = max(tally.code, EXIT_DATA)
    summary(f"{where}: {counts}")
    error(f"{where}: {stop.kind} at offset {stop.offset}: {stop.error}")


# --- the command ---------------------------------------------------------------------------


def cmd_dump(args: argparse.Namespace) -> int:
    if args.start is not None and args.end is not None and args.end <= args.start[0]:
        raise CliError(f"--end {args.end} must be greater than --start "
                       f"{format_position(args.start)}")
    if bool(args.files) == (args.topic is not None):
        raise CliError("dump takes segment FILEs or directories, or --topic and --partition "
                       "with --zk/--broker-list (a live range), not both")
    if not args.files:
        return _dump_live(args)
    if args.zk or args.broker_list or args.partition:
        raise CliError("segment FILEs take no --zk/--broker-list/--partition")
    tally, progress = _Tally(), Progress("dump")
    with tally.interrupts:
        return _dump_files(args, tally, progress)


def _dump_files(args: argparse.Namespace, tally: _Tally, progress: Progress) -> int:
    files: list[Path] = []
    for path in args.files:
        try:
            files.extend(segment_files(path))
        except CliError as e:  # say so and go on with the others
            error(str(e))
            tally.code = EXIT_USAGE
    several, done = len(files) > 1, 0
    for f in files:
        done += 1
        if several and not args.json:
            tally.line(f"Dumping {f}")
        try:
            print_items(read_segment_file(f, verify_crc=not args.no_verify), args, str(f),
                        tally, progress, tag=str(f) if several else None,
                        begin=(segment_base_offset(f), 0))
        except BrokenPipeError:  # stdout closed (`| head`): the reader is done, not the file
            raise
        except OSError as e:  # unreadable, or gone since it was listed: go on with the others
            progress.clear()
            error(f"cannot read segment file {f}: {e.strerror}")
            tally.code = max(tally.code, EXIT_USAGE)
        if args.max_messages is not None and tally.messages >= args.max_messages:
            break
    if several:  # --max-messages may have stopped before the last file
        read = plural(len(files), "file") if done == len(files) else \
            f"{done} of {plural(len(files), 'file')}"
        summary(f"{read}: {plural(tally.messages, 'message')}"
                + (f", {tally.invalid} not valid" if tally.invalid else ""))
    return tally.code


def _dump_live(args: argparse.Namespace) -> int:
    from kafka_pyspark.client import earliest, latest

    if not (args.zk or args.broker_list) or args.partition is None:
        raise CliError("a live dump needs --zk or --broker-list, --topic and --partition B-P")
    key = args.partition
    tally = _Tally()
    with open_cluster(args) as cluster:
        brokers = live_brokers(cluster)
        require_live(brokers, [key])
        if cluster.registry() is not None and key not in registered_partitions(cluster, args.topic):
            raise CliError(f"topic {args.topic!r} has no partition {bp(key)}", EXIT_DATA)
        with broker_connection(key[0], brokers[key[0]], args.timeout_ms) as conn:
            lo, hi = earliest(conn, args.topic, key[1]), latest(conn, args.topic, key[1])
            start = lo if args.start is None else args.start[0]
            end = hi if args.end is None else min(args.end, hi)
            if not lo <= start <= hi:
                raise CliError(f"--start {start} is outside {args.topic} {bp(key)}'s log "
                               f"[{lo}, {hi}]", EXIT_DATA)
            where = f"{args.topic} {bp(key)}"
            items = read_live_range(conn, args.topic, key[1], start, end,
                                    verify_crc=not args.no_verify)
            first = next(items)
            if isinstance(first, DumpStop) and first.kind == "corrupt" and \
                    args.start is not None and first.offset == start:
                # a broker serves bytes from any offset: the framing there says which it was
                raise CliError(f"{where}: no message starts at --start {start}: it is inside "
                               f"a message, or the log is corrupt there ({first.error})",
                               EXIT_DATA)
            with tally.interrupts:
                print_items(itertools.chain([first], items), args, where, tally,
                            Progress("dump"), begin=(start, 0))
    return tally.code


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dump", help="decode segment files or directories, or a live broker-partition range",
        description="dump FILE|DIR... | dump --zk ZK --topic T --partition B-P "
                    "[--start N] [--end N]. Each message with 0.7's facts (offset, size, magic, "
                    "codec, CRC, valid), like 0.7's DumpLogSegments",
    )
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="segment files (%%020d.kafka; %%020d.log of a later Kafka) or "
                   "directories holding them (a partition or a whole log directory)")
    add_cluster_args(p, required=False)
    p.add_argument("--topic", help="the topic of a live range")
    p.add_argument("--partition", type=parse_broker_partition,
                   help="the broker-partition of a live range, brokerId-partition (0-1)")
    p.add_argument("--start", type=parse_position, metavar="N[+K]",
                   help="show messages at this byte offset or later (default: the first); a "
                   "live range is fetched from it, so it must be where a message starts. "
                   "N+K: also skip the first K messages of the compressed wrapper at N (where "
                   "Ctrl-C stopped: it prints this)")
    p.add_argument("--end", type=non_negative_int,
                   help="show messages before this byte offset (default: up to the end)")
    p.add_argument("--max-messages", type=positive_int, help="stop after this many messages")
    p.add_argument("--values", action="store_true", help="print payloads")
    p.add_argument("--no-verify", action="store_true",
                   help="do not check CRCs (valid=unchecked)")
    p.set_defaults(func=cmd_dump)
