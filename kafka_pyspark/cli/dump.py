"""``kafka07 dump``: the messages of a segment file or of a live broker-partition range.

The seam other formats plug into: :data:`FILE_READERS` maps a file-name suffix to a reader, a
function ``(path, verify_crc) -> Iterator[DumpMessage | DumpStop]`` that yields every valid
message in order and ends with exactly one :class:`DumpStop` saying where and why it stopped
(the end, a torn tail, or a fault). The printer needs nothing else; fields a later format has
and 0.7 does not (key, timestamp, headers) go into :attr:`DumpMessage.extra`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kafka_pyspark.cli.common import (
    EXIT_DATA,
    EXIT_OK,
    CliError,
    add_cluster_args,
    bp,
    broker_connection,
    json_line,
    live_brokers,
    open_cluster,
    parse_broker_partition,
    payload_fields,
    positive_int,
    require_live,
    topic_partitions,
)
from kafka_pyspark.errors import MessageError

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_pyspark.client import BrokerConnection

#: bytes read from a segment file at a time (a larger message is read whole, in more chunks)
CHUNK = 8 << 20

StopKind = Literal["end", "torn-tail", "corrupt"]


@dataclass(frozen=True)
class DumpMessage:
    """One decoded message (an inner message of a compressed wrapper is one too)."""

    offset: int
    next_offset: int
    inner_index: int
    compression: str
    value: bytes
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DumpStop:
    """Where reading stopped: ``offset`` is the first byte not shown as part of a message."""

    kind: StopKind
    offset: int
    error: str | None = None


DumpItem = DumpMessage | DumpStop
FileReader = Callable[[Path, bool], Iterator[DumpItem]]


def _messages(batch: pa.RecordBatch) -> Iterator[DumpMessage]:
    cols = batch.to_pydict()
    for i in range(batch.num_rows):
        yield DumpMessage(
            cols["offset"][i], cols["next_offset"][i], cols["inner_index"][i],
            cols["compression"][i], cols["value"][i],
        )


def segment_base_offset(path: Path) -> int:
    """A segment file is named after its first offset (``%020d.kafka``); else 0."""
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


def _decode_prefix(buf: bytes, pos: int, verify: bool, err: MessageError) -> Iterator[DumpItem]:
    """The valid messages of ``buf`` before the fault ``err``, then the fault."""
    from kafka_pyspark.messages import decode_message_set

    at = err.offset if err.offset is not None and err.offset >= pos else pos
    if at > pos:
        yield from _messages(decode_message_set(buf, pos, verify_crc=verify, stop_at=at).batch)
    yield DumpStop("corrupt", at, str(err))


def read_07_segment(path: Path, verify_crc: bool = True) -> Iterator[DumpItem]:
    """A Kafka 0.7 segment file (``%020d.kafka``): offsets are base offset + file position."""
    from kafka_pyspark.messages import decode_message_set

    pos = segment_base_offset(path)
    carry = b""
    with open(path, "rb") as f:
        while True:
            data = f.read(CHUNK)
            buf = carry + data
            if not buf:
                break
            try:
                res = decode_message_set(buf, pos, verify_crc=verify_crc)
            except MessageError as e:
                yield from _decode_prefix(buf, pos, verify_crc, e)
                return
            yield from _messages(res.batch)
            pos, carry = res.next_offset, buf[res.bytes_consumed :]
            if not data:
                if carry:
                    yield DumpStop(
                        "torn-tail", pos, f"{len(carry)} bytes at offset {pos} are not a whole "
                        "message (a torn tail: 0.7 recovery truncates it)",
                    )
                    return
                break
    yield DumpStop("end", pos)


def _log_extra(row: Mapping[str, Any]) -> dict[str, Any]:
    """The later formats' fields of a row, JSON-ready (bytes as UTF-8 text, else repr)."""
    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8", "backslashreplace")

    ts = row["timestamp"]
    extra: dict[str, Any] = {
        "key": text(row["key"]),
        "timestamp": None if ts is None else int(ts.timestamp() * 1000),
        "timestamp_type": row["timestamp_type"],
    }
    if row["headers"] is not None:
        extra["headers"] = [[h["key"], text(h["value"])] for h in row["headers"]]
    if row["value"] is None:
        extra["value_null"] = True
    return extra


def read_log_segment(path: Path, verify_crc: bool = True) -> Iterator[DumpItem]:
    """A later Kafka segment file (``%020d.log``: message sets v0/v1, record batches v2) read
    as the ``path`` reader reads it (control batches and aborted transactions left out);
    offsets are logical, the stop's ``offset`` is a byte position in the file."""
    import pyarrow.fs as pafs

    from kafka_pyspark.segments.files import SegmentFile
    from kafka_pyspark.segments.read import ReadSettings, ReadStop, SegmentSplit, iter_split

    size = path.stat().st_size
    f = SegmentFile("", 0, segment_base_offset(path), str(path.resolve()), size, "log")
    items = iter_split(pafs.LocalFileSystem(), SegmentSplit(f, 0, size),
                       ReadSettings(verify_crc=verify_crc))
    for item in items:
        if isinstance(item, ReadStop):
            yield DumpStop(item.kind, item.position,
                           None if item.error is None else f"byte {item.position}: {item.error}")
            return
        for row in item.to_pylist():
            yield DumpMessage(row["offset"], row["next_offset"], row["inner_index"],
                              row["compression"], row["value"] or b"", _log_extra(row))


#: file-name suffix -> reader; a name with no known suffix is read as a 0.7 segment
FILE_READERS: dict[str, FileReader] = {".kafka": read_07_segment, ".log": read_log_segment}


def read_segment_file(path: str | Path, *, verify_crc: bool = True) -> Iterator[DumpItem]:
    """Every valid message of a segment file, then one :class:`DumpStop`."""
    p = Path(path)
    reader = FILE_READERS.get(p.suffix, read_07_segment)
    return reader(p, verify_crc)


def read_live_range(
    conn: BrokerConnection, topic: str, partition: int, start: int, end: int,
    *, verify_crc: bool = True,
) -> Iterator[DumpItem]:
    """Every valid message in ``[start, end)`` of a live broker-partition, then a stop."""
    from kafka_pyspark.client import iter_range

    pos = start
    try:
        for res in iter_range(conn, topic, partition, start, end, verify_crc=verify_crc):
            yield from _messages(res.batch)
            pos = res.next_offset
    except MessageError as e:
        at = e.offset if e.offset is not None and e.offset >= pos else pos
        if at > pos:
            for res in iter_range(conn, topic, partition, pos, at, verify_crc=verify_crc):
                yield from _messages(res.batch)
        yield DumpStop("corrupt", at, str(e))
        return
    yield DumpStop("end", pos)


# --- printing ------------------------------------------------------------------------------


def print_items(items: Iterator[DumpItem], args: argparse.Namespace, where: str) -> int:
    shown = 0
    for item in items:
        if isinstance(item, DumpStop):
            return _print_stop(item, args, where)
        if args.max_messages is not None and shown >= args.max_messages:
            return EXIT_OK
        shown += 1
        if args.json:
            doc: dict[str, Any] = {
                "offset": item.offset, "next_offset": item.next_offset,
                "inner_index": item.inner_index, "compression": item.compression,
                "size": len(item.value), **item.extra,
            }
            if args.values:
                doc.update(payload_fields(item.value))
            json_line(doc)
            continue
        line = (
            f"offset={item.offset} next={item.next_offset} inner={item.inner_index} "
            f"codec={item.compression} size={len(item.value)}"
        )
        line += "".join(f" {k}={v!r}" for k, v in item.extra.items())
        if args.values:
            line += f" value={item.value!r}"
        print(line)
    return EXIT_OK


def _print_stop(stop: DumpStop, args: argparse.Namespace, where: str) -> int:
    if args.json:
        json_line({"stop": stop.kind, "offset": stop.offset, "error": stop.error})
    if stop.kind == "end":
        print(f"{where}: end offset {stop.offset}", file=sys.stderr)
        return EXIT_OK
    print(f"kafka07: {where}: {stop.kind} at offset {stop.offset}: {stop.error}", file=sys.stderr)
    return EXIT_DATA


def cmd_dump(args: argparse.Namespace) -> int:
    if (args.file is None) == (args.topic is None):
        raise CliError("dump takes a segment FILE, or --topic and --partition with --zk/"
                       "--broker-list (a live range), not both")
    if args.file is not None:
        if args.zk or args.broker_list or args.partition:
            raise CliError("a segment FILE takes no --zk/--broker-list/--partition")
        if not os.path.isfile(args.file):
            why = "is a directory" if os.path.isdir(args.file) else "no such file"
            raise CliError(f"cannot read segment file {args.file}: {why}")
        return print_items(read_segment_file(args.file, verify_crc=not args.no_verify),
                           args, args.file)
    return _dump_live(args)


def _dump_live(args: argparse.Namespace) -> int:
    from kafka_pyspark.client import earliest, latest

    if not (args.zk or args.broker_list) or args.partition is None:
        raise CliError("a live dump needs --zk or --broker-list, --topic and --partition B-P")
    key = args.partition
    with open_cluster(args) as cluster:
        brokers = live_brokers(cluster)
        require_live(brokers, [key])
        if cluster.registry() is not None and key not in topic_partitions(cluster, args.topic):
            raise CliError(f"topic {args.topic!r} has no partition {bp(key)}", EXIT_DATA)
        with broker_connection(key[0], brokers[key[0]], args.timeout_ms) as conn:
            start = earliest(conn, args.topic, key[1]) if args.start is None else args.start
            end = latest(conn, args.topic, key[1]) if args.end is None else args.end
            where = f"{args.topic} {bp(key)}"
            items = read_live_range(conn, args.topic, key[1], start, end,
                                    verify_crc=not args.no_verify)
            return print_items(items, args, where)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dump", help="decode a segment file, or a live broker-partition range",
        description="dump FILE | dump --zk ZK --topic T --partition B-P [--start N] [--end N]",
    )
    p.add_argument("file", nargs="?", help="a segment file (%%020d.kafka, or %%020d.log of a "
                   "later Kafka)")
    add_cluster_args(p, required=False)
    p.add_argument("--topic")
    p.add_argument("--partition", type=parse_broker_partition, help="brokerId-partition")
    p.add_argument("--start", type=int, help="first byte offset (default: earliest)")
    p.add_argument("--end", type=int, help="stop before this offset (default: latest)")
    p.add_argument("--max-messages", type=positive_int)
    p.add_argument("--values", action="store_true", help="print payloads")
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks")
    p.set_defaults(func=cmd_dump)
