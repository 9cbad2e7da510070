"""``kafka07 topics`` and ``offsets``: tables from the registry and OFFSETS requests.

The rows come from below the command (:func:`kafka_pyspark._admin.topics.topic_overview`;
the offsets rows are :func:`kafka_pyspark._admin.offsets.partition_offsets`, where every
broker is asked in parallel under its own deadline: a hung or unreachable broker becomes an
error row, the rest of the table is still filled); this module renders them. ``lag`` is
:mod:`kafka_pyspark.cli._lag`.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from kafka_pyspark._admin.offsets import partition_offsets
from kafka_pyspark._admin.topics import topic_overview
from kafka_pyspark.cli._common import EXIT_OK, add_cluster_args, open_cluster, worst
from kafka_pyspark.cli._output import json_document, table

# --- topics --------------------------------------------------------------------------------


def cmd_topics(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        brokers, rows = topic_overview(cluster)
    if args.json:
        json_document({
            "brokers": [{"id": b, "address": a} for b, a in brokers.items()],
            "topics": [
                {
                    "topic": r.topic,
                    "partitions": {str(b): n for b, n in r.partitions.items()},
                    "not_live": list(r.not_live),
                    "live_partitions": r.live_partitions,
                }
                for r in rows
            ],
        })
        return EXIT_OK
    table(["broker", "address"], [[b, a] for b, a in brokers.items()])
    print()
    table(
        ["topic", "partitions", "per broker (id:count)"],
        [
            [r.topic, r.live_partitions, " ".join(
                f"{b}:{n}" + (" (not live)" if b in r.not_live else "")
                for b, n in r.partitions.items()
            )]
            for r in rows
        ],
    )
    return EXIT_OK


# --- offsets -------------------------------------------------------------------------------


def cmd_offsets(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        rows = partition_offsets(cluster, args.topic, args.timeout_ms)
    code = worst([2 if r.error else 0 for r in rows])
    if args.json:
        json_document({"topic": args.topic, "partitions": [asdict(r) for r in rows]})
        return code
    out: list[list[object]] = []
    for r in rows:
        name = f"{r.broker}-{'?' if r.partition is None else r.partition}"
        if r.error is not None:
            out.append([name, "-", "-", "-", f"error: {r.error}"])
        else:
            assert r.earliest is not None and r.latest is not None
            out.append([name, r.earliest, r.latest, r.latest - r.earliest, ""])
    table(["broker-partition", "earliest", "latest", "bytes", "status"], out)
    return code


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("topics", help="brokers and topics (partitions per broker) from ZooKeeper")
    add_cluster_args(p, broker_list=False)
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("offsets", help="earliest/latest offset per broker-partition")
    add_cluster_args(p)
    p.add_argument("--topic", required=True, help="the topic whose partitions to show")
    p.set_defaults(func=cmd_offsets)
