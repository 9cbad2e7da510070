"""``kafka07 consume``: a topic's messages to stdout, one per line (or JSON lines)."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from kafka_pyspark._admin.offsets import live_brokers, registered_partitions
from kafka_pyspark._shared.partition_key import parse_partition_key
from kafka_pyspark.cli._common import (
    EXIT_DATA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_cluster_args,
    bp,
    broker_connection,
    open_cluster,
    parse_broker_partition,
    positive_int,
    require_live,
)
from kafka_pyspark.cli._output import Progress, error, payload_fields, plural, summary
from kafka_pyspark.cli._resume import (
    Interrupts,
    Position,
    after_row,
    format_position,
    format_positions,
    line_writer,
    parse_positions,
)
from kafka_pyspark.errors import KafkaError, MessageError

#: the lines' buffer: a fetch's lines (up to this many bytes) are written without blocking
LINE_BUFFER = 4 << 20

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_pyspark._cluster import Cluster


def _starts(c: _Consumer, cluster: Cluster, keys: list[tuple[int, int]],
            bounds: dict[tuple[int, int], tuple[int, int]]) -> dict[tuple[int, int], Position]:
    args = c.args
    if args.resume is not None:
        for k in keys:
            lo, hi = bounds[k]
            if not lo <= args.resume[k][0] <= hi:
                raise CliError(f"--start {bp(k)}={format_position(args.resume[k])} is outside "
                               f"its log [{lo}, {hi}]", EXIT_DATA)
        return {k: args.resume[k] for k in keys}
    how = args.start_from or "earliest"
    if how == "earliest":
        return {k: (bounds[k][0], 0) for k in keys}
    if how == "latest":
        return {k: (bounds[k][1], 0) for k in keys}
    if how == "group":
        return {k: (n, 0) for k, n in _group_starts(c, cluster, keys, bounds).items()}
    try:
        n = int(how)
    except ValueError:
        raise CliError(f"--from {how!r}: expected earliest, latest, group or a byte offset") \
            from None
    if len(keys) != 1:
        raise CliError("--from N (a byte offset) needs exactly one --partition")
    lo, hi = bounds[keys[0]]
    if not lo <= n <= hi:
        raise CliError(f"offset {n} is outside {bp(keys[0])}'s log [{lo}, {hi}]", EXIT_DATA)
    return {keys[0]: (n, 0)}


def _group_starts(c: _Consumer, cluster: Cluster, keys: list[tuple[int, int]],
                  bounds: dict[tuple[int, int], tuple[int, int]]) -> dict[tuple[int, int], int]:
    """The offsets ``--group`` committed (the earliest where it committed none). A committed
    node not in 0.7's format, or an offset outside its log (0.7's consumer would fail or
    reset there), fails its broker-partition; the others are read."""
    args = c.args
    registry = cluster.registry()
    if args.group is None or registry is None:
        raise CliError("--from group needs --group and --zk")
    committed, malformed = registry.group_offsets_checked(args.group, args.topic)
    for name, problem in malformed.items():
        key = parse_partition_key(name)
        if key in keys:
            c.fail(key, EXIT_DATA, f"{problem}; not read")
    starts = {k: committed.get(k, bounds[k][0]) for k in keys}
    for k, start in starts.items():
        lo, hi = bounds[k]
        if k not in c.failed and not lo <= start <= hi:
            c.fail(k, EXIT_DATA, f"group {args.group!r} committed offset {start}, outside the "
                   f"log [{lo}, {hi}]; not read")
    return starts


class _Consumer:
    def __init__(self, args: argparse.Namespace, cluster: Cluster) -> None:
        self.args = args
        self.brokers = live_brokers(cluster)
        if args.resume is not None and args.partition:
            raise CliError("--start names the broker-partitions to read: no --partition")
        keys = list(args.resume or ()) or args.partition or (
            registered_partitions(cluster, args.topic) if cluster.registry() is not None
            else cluster.partitions(args.topic)
        )
        self.keys = sorted(set(keys))
        require_live(self.brokers, self.keys)
        self.shown = 0
        self.code = EXIT_OK
        self.failed: set[tuple[int, int]] = set()
        self.progress = Progress("consume")
        #: where each broker-partition stopped: the position after its last message shown
        self.at: dict[tuple[int, int], Position] = {}
        # a fetch's lines go into the buffer with their positions noted, Ctrl-C held
        # meanwhile; the buffer is written out after each fetch, where Ctrl-C may come
        self.out = line_writer(LINE_BUFFER)
        self.interrupts = Interrupts()

    def budget(self) -> int | None:
        m = self.args.max_messages
        return None if m is None else m - self.shown

    def bounds(self, key: tuple[int, int]) -> tuple[int, int]:
        from kafka_pyspark.client import earliest, latest

        with broker_connection(key[0], self.brokers[key[0]], self.args.timeout_ms) as conn:
            return earliest(conn, self.args.topic, key[1]), latest(conn, self.args.topic, key[1])

    def read(self, key: tuple[int, int], start: Position, end: int) -> None:
        """Print ``[start, end)`` of one broker-partition (skipping the messages of the
        wrapper at ``start`` shown already); :attr:`at` follows each message shown."""
        from kafka_pyspark.client import iter_range

        self.at[key] = start
        try:
            with broker_connection(key[0], self.brokers[key[0]], self.args.timeout_ms) as conn:
                for res in iter_range(conn, self.args.topic, key[1], start[0], end):
                    budget = self.budget()
                    begin = self.at[key]
                    n = self.emit(res.batch, key, begin, budget)
                    if budget is None or n < budget:
                        self.emitted_all(key, res.next_offset)
                    self.shown += n
                    self.progress.add(n, res.next_offset - begin[0])
                    if budget is not None and self.budget() == 0:
                        break
        except KafkaError as e:
            self.fail(key, EXIT_DATA if isinstance(e, MessageError) else EXIT_USAGE, str(e))

    def emit(self, batch: pa.RecordBatch, key: tuple[int, int], begin: Position,
             budget: int | None) -> int:
        """Write the rows of ``batch`` (after those of the wrapper at ``begin`` shown
        already), at most ``budget``; returns how many."""
        cols = batch.to_pydict()
        offsets, inner = cols["offset"], cols["inner_index"]
        first = 0
        while first < len(offsets) and offsets[first] == begin[0] and inner[first] < begin[1]:
            first += 1
        last = len(offsets) if budget is None else min(len(offsets), first + budget)
        with self.interrupts.held():
            self._lines(cols, key, first, last)
        self.out.flush()
        return last - first

    def _lines(self, cols: dict[str, list[Any]], key: tuple[int, int], first: int,
               last: int) -> None:
        """Rows ``first`` to ``last`` of a fetch into :attr:`out`, each with its position."""
        offsets, nexts, inner = cols["offset"], cols["next_offset"], cols["inner_index"]
        for i in range(first, last):
            value = cols["value"][i]
            if self.args.json:
                line = json.dumps({
                    "topic": self.args.topic, "broker": key[0], "partition": key[1],
                    "offset": offsets[i], "next_offset": nexts[i], "inner_index": inner[i],
                    "compression": cols["compression"][i], **payload_fields(value)},
                    separators=(",", ":")).encode() + b"\n"
            else:
                line = value + b"\n"
            self.out.write(line)
            self.at[key] = after_row(offsets, nexts, inner, i)

    def emitted_all(self, key: tuple[int, int], next_offset: int) -> None:
        """A fetch's rows were all shown: the next one starts at ``next_offset``."""
        self.at[key] = (next_offset, 0)

    def fail(self, key: tuple[int, int], code: int, message: str) -> None:
        """Say why ``key`` is not read (any further); the others go on."""
        self.failed.add(key)
        self.code = max(self.code, code)
        self.progress.clear()
        error(f"{self.args.topic} {bp(key)}: {message}")

    def finish(self) -> int:
        """The summary line; returns the exit code."""
        self.progress.clear()
        read = len(self.keys) - len(self.failed)
        summary(f"consumed {plural(self.shown, 'message')} from {self.args.topic!r} "
                f"({plural(read, 'broker-partition')} read"
                + (f", {len(self.failed)} failed)" if self.failed else ")"))
        return self.code


def cmd_consume(args: argparse.Namespace) -> int:
    if args.resume is not None and args.start_from is not None:
        raise CliError("give --from or --start, not both")
    with open_cluster(args) as cluster:
        c = _Consumer(args, cluster)
        bounds: dict[tuple[int, int], tuple[int, int]] = {}
        for k in c.keys:
            _refresh_bounds(c, k, bounds, args.topic)
        pos = _starts(c, cluster, [k for k in c.keys if k in bounds], bounds)
    c.at.update(pos)
    try:
        with c.interrupts:
            _read_all(c, bounds)
    except KeyboardInterrupt:  # how --follow is stopped; the summary still ends it
        with contextlib.suppress(OSError):
            c.out.flush()  # the lines taken before Ctrl-C, which the positions count
        c.progress.clear()
        error(f"interrupted; to resume where it stopped: --start {format_positions(c.at)}")
        code = c.finish()
        return code if args.follow else EXIT_INTERRUPTED
    return c.finish()


def _read_all(c: _Consumer, bounds: dict[tuple[int, int], tuple[int, int]]) -> None:
    """Read every broker-partition from :attr:`_Consumer.at` to its bound; with ``--follow``
    poll again."""
    args = c.args
    while True:
        for k in list(c.at):
            if k in c.failed or c.budget() == 0:
                continue
            end = bounds[k][1] if k in bounds else c.at[k][0]
            if c.at[k][0] < end:
                c.read(k, c.at[k], end)
        if not args.follow or c.budget() == 0 or all(k in c.failed for k in c.at):
            return
        time.sleep(args.poll_ms / 1000.0)
        for k in c.at:
            if k not in c.failed:
                _refresh_bounds(c, k, bounds, args.topic)


def _refresh_bounds(
    c: _Consumer, k: tuple[int, int], bounds: dict[tuple[int, int], tuple[int, int]], topic: str
) -> None:
    """Ask ``k``'s log bounds into ``bounds``; a broker that fails is marked and reported once."""
    try:
        bounds[k] = c.bounds(k)
    except KafkaError as e:
        c.fail(k, EXIT_USAGE, str(e))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("consume", help="a topic's messages to stdout, one per line")
    add_cluster_args(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--partition", type=parse_broker_partition, action="append",
                   help="brokerId-partition (repeatable; default: all)")
    p.add_argument("--from", dest="start_from",
                   help="earliest (default), latest, group, or a byte offset N")
    p.add_argument("--start", dest="resume", type=parse_positions, metavar="B-P=N[+K],...",
                   help="resume where an interrupted consume stopped (Ctrl-C prints this): "
                   "each broker-partition named from byte offset N, K messages of the "
                   "compressed wrapper at N skipped; only those broker-partitions are read")
    p.add_argument("--group", help="consumer group for --from group")
    p.add_argument("--max-messages", type=positive_int, help="stop after this many messages")
    p.add_argument("--follow", action="store_true",
                   help="keep polling for new messages (until --max-messages or Ctrl-C)")
    p.add_argument("--poll-ms", type=positive_int, default=1000,
                   help="with --follow: how often to look for new messages (default 1000)")
    p.set_defaults(func=cmd_consume)


