"""``kafka07 lag``: a consumer group's committed offsets, owners and lag, with totals.

The rows and the totals per topic and for the group are :mod:`kafka_pyspark._admin.lag`
(``kafka_pyspark.group_lag`` returns the same rows); this module renders them, like 0.7's
``ConsumerOffsetChecker`` with each partition's owner.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from kafka_pyspark._admin.group_offsets import offsets_document
from kafka_pyspark._admin.lag import DATA_PROBLEMS, ERROR, LagRow, group_lag, lag_totals
from kafka_pyspark.cli._common import EXIT_DATA, EXIT_OK, add_cluster_args, open_cluster, worst
from kafka_pyspark.cli._output import json_document, plural, summary, table


def lag_exit_code(rows: list[LagRow]) -> int:
    return worst([
        2 if r.status == ERROR else EXIT_DATA if r.status in DATA_PROBLEMS else EXIT_OK
        for r in rows
    ])


def _cell(v: int | str | None) -> object:
    return "-" if v is None else v


def cmd_lag(args: argparse.Namespace) -> int:
    topics = [t.strip() for t in args.topic.split(",") if t.strip()] if args.topic else None
    with open_cluster(args) as cluster:
        rows = group_lag(cluster, args.group, topics, args.timeout_ms)
    totals = lag_totals(rows)
    code = lag_exit_code(rows)
    if args.json:
        committed: dict[str, dict[tuple[int, int], int]] = {}
        for r in rows:
            if r.offset is not None and r.broker is not None and r.partition is not None:
                committed.setdefault(r.topic, {})[(r.broker, r.partition)] = r.offset
        doc: dict[str, Any] = {"group": args.group, "partitions": [asdict(r) for r in rows],
                               "totals": [asdict(t) for t in totals],
                               "offsets": offsets_document(args.group, committed)["offsets"]}
        json_document(doc)
        return code
    table(
        ["group", "topic", "broker-partition", "offset", "latest", "lag", "owner", "status"],
        [
            [r.group, r.topic, r.node, _cell(r.offset), _cell(r.latest), _cell(r.lag),
             _cell(r.owner), r.status + (f": {r.error}" if r.error else "")]
            for r in rows
        ],
    )
    print()
    table(["group", "topic", "lag", "partitions", "owned", "problems", "not-committed",
           "not-committed-bytes"],
          [[args.group, t.topic, t.lag, t.partitions, t.owned, t.problems, t.not_committed,
            t.not_committed_bytes] for t in totals])
    g = totals[-1]
    fresh = (f"; {plural(g.not_committed, 'broker-partition')} not committed, holding "
             f"{plural(g.not_committed_bytes, 'byte')} (not in the lag)" if g.not_committed
             else "")
    summary(f"group {args.group!r}: lag {g.lag} bytes over "
            f"{plural(g.partitions, 'broker-partition')}, {plural(g.problems, 'problem')}"
            + fresh)
    return code


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lag", help="a consumer group's committed offsets, owners and lag, with totals "
        "(like 0.7's ConsumerOffsetChecker)"
    )
    add_cluster_args(p, broker_list=False)
    p.add_argument("--group", required=True, help="the consumer group (group.id)")
    p.add_argument("--topic", help="comma-separated topics (default: all the group committed)")
    p.set_defaults(func=cmd_lag)
