"""``kafka07 produce``: stdin lines to a topic, through the connector's own write path.

:class:`~kafka_pyspark._write.TaskWriter` (the engine of the Spark sink; no Spark needed) does
the work: the same routing as ``df.write`` (a key picks the broker-partition with Java's
``String.hashCode``, as 0.7's ``DefaultPartitioner``; no key: random; a new topic: partition 0
of every live broker), message sets of ``--batch-size`` in
``--codec``, and the delivery barrier: it reports success only for what the brokers confirmed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from kafka_pyspark.cli._common import (
    EXIT_DATA,
    EXIT_OK,
    CliError,
    add_cluster_args,
    bp,
    cluster_settings,
    positive_int,
    zk_credentials,
)
from kafka_pyspark.cli._output import Progress, error, json_document, plural, summary

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_pyspark._write import WritePlan

#: stdin lines (and at most this many bytes of them) per Arrow batch handed to the writer
LINES_PER_BATCH = 10000
BYTES_PER_BATCH = 64 << 20

#: the end of ``produce``'s error when a broker fails mid-write (the writer's text names what
#: was confirmed and what was not)
PRODUCE_RETRY_NOTE = (
    "Nothing was retried: running the command again sends every line again (duplicates "
    "possible for the lines not confirmed as written)"
)


class _Lines:
    """stdin lines as Arrow batches; stops (and remembers why) at a line without a key."""

    def __init__(self, stream: IO[bytes], separator: bytes | None) -> None:
        self.stream = stream
        self.separator = separator
        self.lines = 0
        self.bad_line: int | None = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        keys: list[str] = []
        values: list[bytes] = []
        size = 0
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
            size += len(line)
            if len(values) >= LINES_PER_BATCH or size >= BYTES_PER_BATCH:
                yield self._batch(keys, values)
                keys, values, size = [], [], 0
        if values:
            yield self._batch(keys, values)

    def _batch(self, keys: list[str], values: list[bytes]) -> pa.RecordBatch:
        # from buffers, not pa.array(list): that imports pandas (a second of a short run)
        import pyarrow as pa

        from kafka_pyspark._messages.arrays import binary_array, string_array

        cols = [binary_array(list(values))]
        if self.separator is not None:
            cols.append(string_array(keys))
        names = ["value", "key"][: len(cols)]
        return pa.RecordBatch.from_arrays(cols, names=names)


def _write_plan(args: argparse.Namespace, keyed: bool) -> WritePlan:
    """The writer's plan for ``produce``, as ``df.write`` would make it, with the command's
    ZooKeeper credentials, one attempt per broker and no Spark retry."""
    from kafka_pyspark._cluster import Cluster
    from kafka_pyspark._options.write_columns import BINARY, STRING, Column, resolve_layout
    from kafka_pyspark._options.write_options import parse_write_options
    from kafka_pyspark._write import resolve_plan

    options = {
        "topic": args.topic, "compression.codec": args.codec, "batch.size": str(args.batch_size),
        # one process, no retries and no task identity: nothing for exactly-once to key on
        "delivery.guarantee": "at-least-once",
        **cluster_settings(args),
    }
    columns = [Column("value", BINARY, BINARY)]
    if keyed:
        columns.append(Column("key", STRING, STRING))
    wopts, copts = parse_write_options(options)
    copts = dataclasses.replace(copts, zk_auth=zk_credentials(args))
    layout = resolve_layout(columns, wopts)
    with Cluster(copts) as cluster:
        plan = resolve_plan(cluster, wopts, layout, copts)
    # --timeout-ms is the whole deadline per broker: one attempt, no reconnects
    return dataclasses.replace(plan, connect_retries=0, retry_note=PRODUCE_RETRY_NOTE)


def _counted(batches: Iterator[pa.RecordBatch], progress: Progress
             ) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        progress.add(batch.num_rows, batch.column(0).nbytes)
        yield batch


def cmd_produce(args: argparse.Namespace) -> int:
    from kafka_pyspark._write import TaskWriter  # the Spark sink's engine, without Spark

    sep = args.key_separator.encode("utf-8") if args.key_separator is not None else None
    if sep is not None and not sep:
        raise CliError("--key-separator must not be empty")
    plan = _write_plan(args, sep is not None)
    if not plan.brokers:
        raise CliError("no live brokers")
    lines = _Lines(sys.stdin.buffer, sep)
    progress = Progress("produce")
    report = TaskWriter(plan, task="kafka07 produce").write(_counted(lines.batches(), progress))
    progress.clear()
    written = {bp((b, p)): m for (_, b, p), m in
               sorted((k, v[0]) for k, v in report.written.items())}
    if args.json:
        json_document({"topic": args.topic, "messages": report.messages,
                       "bytes": report.bytes, "partitions": written})
    else:
        spread = ", ".join(f"{k}: {n}" for k, n in written.items()) or "none"
        summary(f"produced {plural(report.messages, 'message')} to {args.topic!r} ({spread})")
    if report.error is not None:
        error(f"stopped at a bad line: {report.error}")
        return EXIT_DATA
    if lines.bad_line is not None:
        error(f"line {lines.bad_line} has no key separator {args.key_separator!r}; the lines "
              "before it were produced, nothing after it")
        return EXIT_DATA
    return EXIT_OK


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
