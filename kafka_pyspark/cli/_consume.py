"""``kafka07 consume``: a topic's messages to stdout, one per line (or JSON lines)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

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
from kafka_pyspark.cli._output import Progress, error, json_line, payload_fields, plural, summary
from kafka_pyspark.errors import KafkaError, MessageError

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_pyspark._cluster import Cluster


def _starts(c: _Consumer, cluster: Cluster, keys: list[tuple[int, int]],
            bounds: dict[tuple[int, int], tuple[int, int]]) -> dict[tuple[int, int], int]:
    args = c.args
    how = args.start
    if how == "earliest":
        return {k: bounds[k][0] for k in keys}
    if how == "latest":
        return {k: bounds[k][1] for k in keys}
    if how == "group":
        return _group_starts(c, cluster, keys, bounds)
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
    return {keys[0]: n}


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


def _emit(res_batch: pa.RecordBatch, topic: str, key: tuple[int, int], args: argparse.Namespace,
          budget: int | None) -> int:
    cols = res_batch.to_pydict()
    n: int = res_batch.num_rows if budget is None else min(budget, res_batch.num_rows)
    out = sys.stdout.buffer if not args.json else None
    for i in range(n):
        value = cols["value"][i]
        if out is not None:
            out.write(value + b"\n")
        else:
            json_line({"topic": topic, "broker": key[0], "partition": key[1],
                       "offset": cols["offset"][i], "next_offset": cols["next_offset"][i],
                       "inner_index": cols["inner_index"][i],
                       "compression": cols["compression"][i], **payload_fields(value)})
    if out is not None:
        out.flush()
    return n


class _Consumer:
    def __init__(self, args: argparse.Namespace, cluster: Cluster) -> None:
        self.args = args
        self.brokers = live_brokers(cluster)
        keys = args.partition or (
            registered_partitions(cluster, args.topic) if cluster.registry() is not None
            else cluster.partitions(args.topic)
        )
        self.keys = sorted(set(keys))
        require_live(self.brokers, self.keys)
        self.shown = 0
        self.code = EXIT_OK
        self.failed: set[tuple[int, int]] = set()
        self.progress = Progress("consume")

    def budget(self) -> int | None:
        m = self.args.max_messages
        return None if m is None else m - self.shown

    def bounds(self, key: tuple[int, int]) -> tuple[int, int]:
        from kafka_pyspark.client import earliest, latest

        with broker_connection(key[0], self.brokers[key[0]], self.args.timeout_ms) as conn:
            return earliest(conn, self.args.topic, key[1]), latest(conn, self.args.topic, key[1])

    def read(self, key: tuple[int, int], start: int, end: int) -> int:
        """Print ``[start, end)`` of one broker-partition; returns where it got to."""
        from kafka_pyspark.client import iter_range

        pos = start
        try:
            with broker_connection(key[0], self.brokers[key[0]], self.args.timeout_ms) as conn:
                for res in iter_range(conn, self.args.topic, key[1], start, end):
                    budget = self.budget()
                    n = _emit(res.batch, self.args.topic, key, self.args, budget)
                    self.shown += n
                    self.progress.add(n, res.next_offset - pos)
                    pos = res.next_offset
                    if budget is not None and self.budget() == 0:
                        break
        except KafkaError as e:
            self.fail(key, EXIT_DATA if isinstance(e, MessageError) else EXIT_USAGE, str(e))
        return pos

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
    with open_cluster(args) as cluster:
        c = _Consumer(args, cluster)
        bounds: dict[tuple[int, int], tuple[int, int]] = {}
        for k in c.keys:
            _refresh_bounds(c, k, bounds, args.topic)
        pos = _starts(c, cluster, [k for k in c.keys if k in bounds], bounds)
    try:
        _read_all(c, pos, bounds)
    except KeyboardInterrupt:  # how --follow is stopped; the summary still ends it
        code = c.finish()
        return code if args.follow else EXIT_INTERRUPTED
    return c.finish()


def _read_all(c: _Consumer, pos: dict[tuple[int, int], int],
              bounds: dict[tuple[int, int], tuple[int, int]]) -> None:
    """Read every broker-partition from ``pos`` to its bound; with ``--follow`` poll again."""
    args = c.args
    while True:
        for k, start in pos.items():
            if k in c.failed or c.budget() == 0:
                continue
            end = bounds[k][1] if k in bounds else start
            if start < end:
                pos[k] = c.read(k, start, end)
        if not args.follow or c.budget() == 0 or all(k in c.failed for k in pos):
            return
        time.sleep(args.poll_ms / 1000.0)
        for k in pos:
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
    p.add_argument("--from", dest="start", default="earliest",
                   help="earliest (default), latest, group, or a byte offset N")
    p.add_argument("--group", help="consumer group for --from group")
    p.add_argument("--max-messages", type=positive_int, help="stop after this many messages")
    p.add_argument("--follow", action="store_true",
                   help="keep polling for new messages (until --max-messages or Ctrl-C)")
    p.add_argument("--poll-ms", type=positive_int, default=1000,
                   help="with --follow: how often to look for new messages (default 1000)")
    p.set_defaults(func=cmd_consume)


