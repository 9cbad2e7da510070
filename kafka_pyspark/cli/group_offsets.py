"""``kafka07 group-offsets``: set a consumer group's committed offsets (what 0.7's
``UpdateOffsetsInZK`` does, and more): to the earliest or latest offsets, to the offsets of a
time (0.7 knows time per segment file), or to an explicit JSON map.

The nodes are written by :meth:`Registry.commit_group_offsets`, the one writer of group offsets
(``/consumers/[group]/offsets/[topic]/[brokerId]-[partition]`` = decimal ASCII, persistent,
parents created), so 0.7's consumer starts from them. A group with live consumers (registered
ids, or owner nodes for the topic) is refused unless ``--force``: a running consumer would
overwrite the new offsets with its own on its next commit.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from kafka_pyspark.cli.common import (
    EXIT_DATA,
    EXIT_OK,
    BrokerFailure,
    CliError,
    add_cluster_args,
    bp,
    live_brokers,
    open_cluster,
    per_broker,
    topic_partitions,
)
from kafka_pyspark.cli.output import error, json_document, plural, summary, table
from kafka_pyspark.names import parse_partition_key

if TYPE_CHECKING:
    from kafka_pyspark.client import BrokerConnection
    from kafka_pyspark.cluster import Cluster
    from kafka_pyspark.registry import Registry

Key = tuple[int, int]
NAMED_TARGETS = ("earliest", "latest")


@dataclass(frozen=True)
class OffsetChange:
    broker: int
    partition: int
    current: int | None  # committed now (None: never committed)
    new: int
    earliest: int | None  # the log's bounds, when the broker answered
    latest: int | None


def parse_offsets_json(text: str) -> dict[Key, int]:
    """``{"0-1": 1234, ...}`` -> {(0, 1): 1234}; anything else is a usage error."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"--offsets is not JSON: {e}") from None
    if not isinstance(doc, dict) or not doc:
        raise CliError('--offsets must be a JSON object {"brokerId-partition": offset, ...}')
    out: dict[Key, int] = {}
    for name, value in doc.items():
        key = parse_partition_key(name)
        if key is None:
            raise CliError(f"--offsets: {name!r} is not brokerId-partition (e.g. \"0-1\")")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CliError(f"--offsets: {name}: {value!r} is not a byte offset (an integer >= 0)")
        out[key] = value
    return out


def _target(text: str) -> str:
    t = text.strip().lower()
    if t in NAMED_TARGETS or (t.isdigit() and t.isascii()):
        return t
    raise argparse.ArgumentTypeError(
        f"{text!r} is not earliest, latest or a time in epoch milliseconds"
    )


def _bounds(conn: BrokerConnection, topic: str, parts: list[int], time_ms: int | None
            ) -> dict[int, tuple[int, int, int | None]]:
    from kafka_pyspark.client import before_time, earliest, latest

    out = {}
    for p in parts:
        at = None if time_ms is None else before_time(conn, topic, p, time_ms)
        out[p] = (earliest(conn, topic, p), latest(conn, topic, p), at)
    return out


def plan_changes(cluster: Cluster, registry: Registry, args: argparse.Namespace
                 ) -> list[OffsetChange]:
    """The new offset of every broker-partition concerned (asks the brokers its bounds)."""
    given = parse_offsets_json(args.offsets) if args.offsets is not None else None
    keys = sorted(given) if given is not None else topic_partitions(cluster, args.topic)
    brokers = live_brokers(cluster)
    time_ms = int(args.to) if args.to is not None and args.to.isdigit() else None
    by_broker: dict[int, list[int]] = {}
    for b, p in keys:
        if b in brokers:
            by_broker.setdefault(b, []).append(p)
    answers = per_broker({b: brokers[b] for b in by_broker},
                         lambda conn, b: _bounds(conn, args.topic, by_broker[b], time_ms),
                         args.timeout_ms)
    current = registry.group_offsets_checked(args.group, args.topic)[0]
    changes = []
    for key in keys:
        got = answers.get(key[0])
        if isinstance(got, BrokerFailure):
            raise CliError(f"cannot set {bp(key)}: {got}", got.code)
        lo, hi, at = got[key[1]] if got is not None else (None, None, None)
        new = _new_offset(args, key, given, lo, hi, at)
        changes.append(OffsetChange(*key, current.get(key), new, lo, hi))
    return changes


def _new_offset(args: argparse.Namespace, key: Key, given: Mapping[Key, int] | None,
                lo: int | None, hi: int | None, at: int | None) -> int:
    if given is not None:
        new = given[key]
        if lo is not None and hi is not None and not lo <= new <= hi and not args.force:
            raise CliError(f"{bp(key)}: offset {new} is outside the log [{lo}, {hi}] "
                           "(--force sets it anyway)", EXIT_DATA)
        return new
    if lo is None or hi is None:
        raise CliError(f"broker {key[0]} is not live: cannot look up {bp(key)}'s offsets")
    if args.to == "earliest":
        return lo
    if args.to == "latest":
        return hi
    return lo if at is None else at  # no segment that old: everything is newer


def live_consumers(registry: Registry, group: str, topic: str) -> list[str]:
    """What shows the group is running: registered consumer ids and owner nodes."""
    ids = [f"consumer {c}" for c in registry.consumer_ids(group)]
    owners = [f"owner of {bp(k)}: {o}" for k, o in registry.group_owners(group, topic).items()]
    return ids + owners


def cmd_group_offsets(args: argparse.Namespace) -> int:
    if (args.to is None) == (args.offsets is None):
        raise CliError("give exactly one of --to earliest|latest|TIME_MS and --offsets JSON")
    with open_cluster(args) as cluster:
        registry = cluster.registry()
        assert registry is not None  # --zk is required
        live = live_consumers(registry, args.group, args.topic)
        refusal = (
            f"group {args.group!r} has live consumers ({'; '.join(live)}): they would "
            "overwrite the new offsets on their next commit. Stop them first, or --force"
        )
        if live and not args.force and not args.dry_run:
            raise CliError(refusal, EXIT_DATA)
        changes = plan_changes(cluster, registry, args)
        if not args.dry_run:
            creator = f"{socket.gethostname()}-{os.getpid()}-kafka07"
            registry.commit_group_offsets(args.group, args.topic,
                                          {(c.broker, c.partition): c.new for c in changes},
                                          creator=creator)
    _show(args, changes)
    if live and not args.force:  # a dry run: the real one would be refused
        error(refusal)
        return EXIT_DATA
    return EXIT_OK


def _show(args: argparse.Namespace, changes: list[OffsetChange]) -> None:
    if args.json:
        json_document({"group": args.group, "topic": args.topic, "dry_run": args.dry_run,
                       "partitions": [asdict(c) for c in changes]})
    else:
        table(["broker-partition", "current", "new", "change", "earliest", "latest"], [
            [bp((c.broker, c.partition)), "-" if c.current is None else c.current, c.new,
             "-" if c.current is None else f"{c.new - c.current:+d}",
             "-" if c.earliest is None else c.earliest, "-" if c.latest is None else c.latest]
            for c in changes
        ])
    moved = sum(c.current != c.new for c in changes)
    verb = "would set" if args.dry_run else "set"
    summary(f"{verb} {plural(len(changes), 'offset')} of group {args.group!r} topic "
            f"{args.topic!r} ({moved} changed)" + (": dry run, nothing written"
                                                  if args.dry_run else ""))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "group-offsets",
        help="set a consumer group's committed offsets (like 0.7's UpdateOffsetsInZK)",
        description="Set the committed offsets of GROUP for TOPIC, as 0.7's consumer writes "
        "them (/consumers/GROUP/offsets/TOPIC/BROKER-PARTITION, decimal). Refused while the "
        "group has live consumers unless --force. --dry-run shows the change only.",
    )
    add_cluster_args(p, broker_list=False)
    p.add_argument("--group", required=True, help="the consumer group (group.id)")
    p.add_argument("--topic", required=True, help="the topic whose offsets to set")
    p.add_argument("--to", type=_target, metavar="earliest|latest|TIME_MS",
                   help="every live partition of the topic to its earliest or latest offset, "
                   "or to the start of the newest segment last written before TIME_MS (epoch "
                   "milliseconds; 0.7 knows time per segment file; none that old: earliest)")
    p.add_argument("--offsets", metavar="JSON",
                   help='explicit offsets, {"brokerId-partition": offset, ...}; each must be '
                   "within its log unless --force")
    p.add_argument("--dry-run", action="store_true",
                   help="show what would change, write nothing")
    p.add_argument("--force", action="store_true",
                   help="write even while the group has live consumers, or outside a log")
    p.set_defaults(func=cmd_group_offsets)
