"""``kafka07 lag``: a consumer group's committed offsets, owners and lag, with totals.

The rows are :func:`kafka_pyspark.cli._cluster_cmds.group_lag`; this module adds what 0.7's
``ConsumerOffsetChecker`` shows besides them (each partition's owner) and the totals per
topic and for the group.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from kafka_pyspark.cli._cluster_cmds import (
    DATA_PROBLEMS,
    ERROR,
    LagRow,
    group_lag,
    lag_exit_code,
)
from kafka_pyspark.cli._common import add_cluster_args, open_cluster
from kafka_pyspark.cli._output import json_document, plural, summary, table

#: the topic column of the group's total line
ALL_TOPICS = "(all)"


@dataclass(frozen=True)
class LagTotal:
    """The sum over one topic's rows (or all of them): ``lag`` adds up the rows with a lag."""

    topic: str
    lag: int
    partitions: int
    owned: int
    #: rows that make the command exit non-zero (a data problem or a broker error)
    problems: int


def lag_totals(rows: list[LagRow]) -> list[LagTotal]:
    """One total per topic (in order of appearance), then one for the whole group."""
    by_topic: dict[str, list[LagRow]] = {}
    for r in rows:  # one pass: a group may read hundreds of topics
        by_topic.setdefault(r.topic, []).append(r)

    def total(name: str, part: list[LagRow]) -> LagTotal:
        return LagTotal(
            name, sum(r.lag or 0 for r in part), len(part),
            sum(r.owner is not None for r in part),
            sum(r.status == ERROR or r.status in DATA_PROBLEMS for r in part),
        )

    return [total(t, part) for t, part in by_topic.items()] + [total(ALL_TOPICS, rows)]


def _cell(v: int | str | None) -> object:
    return "-" if v is None else v


def cmd_lag(args: argparse.Namespace) -> int:
    topics = [t.strip() for t in args.topic.split(",") if t.strip()] if args.topic else None
    with open_cluster(args) as cluster:
        rows = group_lag(cluster, args.group, topics, args.timeout_ms)
    totals = lag_totals(rows)
    code = lag_exit_code(rows)
    if args.json:
        doc: dict[str, Any] = {"group": args.group, "partitions": [asdict(r) for r in rows],
                               "totals": [asdict(t) for t in totals]}
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
    table(["group", "topic", "lag", "partitions", "owned", "problems"],
          [[args.group, t.topic, t.lag, t.partitions, t.owned, t.problems] for t in totals])
    group_total = totals[-1]
    summary(f"group {args.group!r}: lag {group_total.lag} bytes over "
            f"{plural(group_total.partitions, 'broker-partition')}, "
            f"{plural(group_total.problems, 'problem')}")
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
