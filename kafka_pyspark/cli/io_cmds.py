"""``kafka07 produce`` (stdin lines to a topic) and ``kafka07 consume`` (a topic to stdout).

``produce`` goes through the connector's own write path (:class:`TaskWriter`): the same
routing as ``df.write`` (a key picks the broker-partition with Java's ``String.hashCode``, as
0.7's ``DefaultPartitioner``; no key: random; a new topic: partition 0 of every live broker),
message sets of ``--batch-size`` in ``--codec``, and the delivery barrier: it reports success
only for what the brokers confirmed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from kafka_pyspark.cli.common import (
    EXIT_DATA,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_cluster_args,
    bp,
    broker_connection,
    live_brokers,
    open_cluster,
    parse_broker_partition,
    positive_int,
    require_live,
    topic_partitions,
    zk_credentials,
)
from kafka_pyspark.cli.output import error, json_document, json_line, payload_fields
from kafka_pyspark.errors import KafkaError, MessageError

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_pyspark.cluster import Cluster
    from kafka_pyspark.spark.writer.plan import WritePlan

#: stdin lines per Arrow batch handed to the writer
LINES_PER_BATCH = 10000

#: the end of ``produce``'s error when a broker fails mid-write (the writer's text names what
#: was confirmed and what was not)
PRODUCE_RETRY_NOTE = (
    "Nothing was retried: running the command again sends every line again (duplicates "
    "possible for the lines not confirmed as written)"
)


# --- produce -------------------------------------------------------------------------------


class _Lines:
    """stdin lines as Arrow batches; stops (and remembers why) at a line without a key."""

    def __init__(self, stream: IO[bytes], separator: bytes | None) -> None:
        self.stream = stream
        self.separator = separator
        self.lines = 0
        self.bad_line: int | None = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        keys: list[str] = []
        values: list[bytes] = []
        for raw in self.stream:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            line = line[:-1] if line.endswith(b"\r") else line
            if self.separator is not None:
                key, sep, line = line.partition(self.separator)
                if not sep:
                    self.bad_line = self.lines + 1
                    break
                keys.append(key.decode("utf-8", "replace"))
            values.append(line)
            self.lines += 1
            if len(values) >= LINES_PER_BATCH:
                yield self._batch(pa, keys, values)
                keys, values = [], []
        if values:
            yield self._batch(pa, keys, values)

    def _batch(self, pa: Any, keys: list[str], values: list[bytes]) -> pa.RecordBatch:
        cols = {"value": pa.array(values, pa.binary())}
        if self.separator is not None:
            cols["key"] = pa.array(keys, pa.string())
        return pa.RecordBatch.from_pydict(cols)


def _write_plan(args: argparse.Namespace, keyed: bool) -> WritePlan:
    """The writer's plan for ``produce``, as ``df.write`` would make it, with the command's
    ZooKeeper credentials, one attempt per broker and no Spark retry."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from kafka_pyspark.cluster import Cluster
    from kafka_pyspark.spark.options.columns import resolve_columns
    from kafka_pyspark.spark.options.write import parse_write_options
    from kafka_pyspark.spark.writer.plan import resolve_plan

    options = {
        "topic": args.topic, "compression.codec": args.codec, "batch.size": str(args.batch_size),
        "socket.timeout.ms": str(args.timeout_ms), "zk.connectiontimeout.ms": str(args.timeout_ms),
    }
    options.update({"zk.connect": args.zk} if args.zk else {"broker.list": args.broker_list})
    fields = [StructField("value", BinaryType())]
    if keyed:
        fields.append(StructField("key", StringType()))
    wopts, copts = parse_write_options(options)
    copts = dataclasses.replace(copts, zk_auth=zk_credentials(args))
    layout = resolve_columns(StructType(fields), wopts)
    with Cluster(copts) as cluster:
        plan = resolve_plan(cluster, wopts, layout, copts)
    # --timeout-ms is the whole deadline per broker: one attempt, no reconnects
    return dataclasses.replace(plan, connect_retries=0, retry_note=PRODUCE_RETRY_NOTE)


def cmd_produce(args: argparse.Namespace) -> int:
    from kafka_pyspark.spark.writer import TaskWriter

    sep = args.key_separator.encode("utf-8") if args.key_separator is not None else None
    if sep is not None and not sep:
        raise CliError("--key-separator must not be empty")
    plan = _write_plan(args, sep is not None)
    if not plan.brokers:
        raise CliError("no live brokers")
    lines = _Lines(sys.stdin.buffer, sep)
    report = TaskWriter(plan, task="kafka07 produce").write(lines.batches())
    written = {bp((b, p)): m for (_, b, p), m in
               sorted((k, v[0]) for k, v in report.written.items())}
    if args.json:
        json_document({"topic": args.topic, "messages": report.messages,
                       "bytes": report.bytes, "partitions": written})
    else:
        spread = ", ".join(f"{k}: {n}" for k, n in written.items()) or "none"
        print(f"produced {report.messages} messages to {args.topic!r} ({spread})",
              file=sys.stderr)
    if report.error is not None:
        error(f"stopped at a bad line: {report.error}")
        return EXIT_DATA
    if lines.bad_line is not None:
        error(f"line {lines.bad_line} has no key separator {args.key_separator!r}; the lines "
              "before it were produced, nothing after it")
        return EXIT_DATA
    return EXIT_OK


# --- consume -------------------------------------------------------------------------------


def _starts(args: argparse.Namespace, cluster: Cluster, keys: list[tuple[int, int]],
            bounds: dict[tuple[int, int], tuple[int, int]]) -> dict[tuple[int, int], int]:
    how = args.start
    if how == "earliest":
        return {k: bounds[k][0] for k in keys}
    if how == "latest":
        return {k: bounds[k][1] for k in keys}
    if how == "group":
        registry = cluster.registry()
        if args.group is None or registry is None:
            raise CliError("--from group needs --group and --zk")
        committed = registry.group_offsets(args.group, args.topic)
        return {k: committed.get(k, bounds[k][0]) for k in keys}
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
            topic_partitions(cluster, args.topic) if cluster.registry() is not None
            else cluster.partitions(args.topic)
        )
        self.keys = sorted(set(keys))
        require_live(self.brokers, self.keys)
        self.shown = 0
        self.code = EXIT_OK
        self.failed: set[tuple[int, int]] = set()

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
                    self.shown += _emit(res.batch, self.args.topic, key, self.args, budget)
                    pos = res.next_offset
                    if budget is not None and self.budget() == 0:
                        break
        except KafkaError as e:
            self.failed.add(key)
            self.code = max(self.code, EXIT_DATA if isinstance(e, MessageError) else EXIT_USAGE)
            error(f"{self.args.topic} {bp(key)}: {e}")
        return pos


def cmd_consume(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        c = _Consumer(args, cluster)
        bounds: dict[tuple[int, int], tuple[int, int]] = {}
        for k in c.keys:
            _refresh_bounds(c, k, bounds, args.topic)
        pos = _starts(args, cluster, [k for k in c.keys if k in bounds], bounds)
    while True:
        for k, start in pos.items():
            if k in c.failed or c.budget() == 0:
                continue
            end = bounds[k][1] if k in bounds else start
            if start < end:
                pos[k] = c.read(k, start, end)
        if not args.follow or c.budget() == 0 or len(c.failed) == len(pos):
            return c.code
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
        c.failed.add(k)
        c.code = EXIT_USAGE
        error(f"{topic} {bp(k)}: {e}")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("produce", help="stdin lines to a topic (one message per line)")
    add_cluster_args(p)
    p.add_argument("--topic", required=True, help="the topic to write to")
    p.add_argument("--codec", choices=["none", "gzip", "snappy"], default="none",
                   help="compression of each message set (default none)")
    p.add_argument("--key-separator", help="each line is KEY<sep>VALUE; the key picks the "
                   "partition as 0.7's DefaultPartitioner does")
    p.add_argument("--batch-size", type=positive_int, default=200,
                   help="messages per message set (default 200)")
    p.set_defaults(func=cmd_produce)

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


