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
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from kafka_pyspark._admin.group_offsets import parse_topic_offsets
from kafka_pyspark._admin.lag import malformed_by_key
from kafka_pyspark._admin.offsets import (
    ask_each,
    broker_offsets,
    by_broker,
    live_brokers,
    offsets_requests,
    registered_partitions,
)
from kafka_pyspark._wire.protocol import INT64_MAX
from kafka_pyspark.cli._common import (
    EXIT_DATA,
    EXIT_OK,
    CliError,
    bp,
    exit_code_for,
    open_cluster,
)
from kafka_pyspark.cli._output import error, json_document, plural, summary, table
from kafka_pyspark.errors import MessageError, OffsetFormatError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Cluster, Registry
    from kafka_pyspark.client import BrokerConnection

Key = tuple[int, int]
NAMED_TARGETS = ("earliest", "latest")
#: bytes first fetched to check that an explicit offset starts a message (a larger message is
#: fetched whole by the fetcher's doubling)
BOUNDARY_FETCH_SIZE = 64 << 10


@dataclass(frozen=True)
class OffsetChange:
    broker: int
    partition: int
    current: int | None  # committed now (None: never committed, or not in 0.7's format)
    new: int
    earliest: int | None  # the log's bounds, when the broker answered
    latest: int | None
    #: why the node committed now is not in 0.7's format (the new value replaces it)
    current_error: str | None = None


def parse_offsets_json(text: str) -> dict[Key, int]:
    """``{"0-1": 1234, ...}`` (one topic's part of :mod:`kafka_pyspark._admin.group_offsets`'
    shape) -> {(0, 1): 1234}; anything else is a usage error."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"--offsets is not JSON: {e}") from None
    try:
        return parse_topic_offsets(doc, "--offsets")
    except OffsetFormatError as e:
        raise CliError(str(e)) from None


def parse_target(text: str) -> str:
    t = text.strip().lower()
    if t in NAMED_TARGETS or (t.isdigit() and t.isascii() and int(t) <= INT64_MAX):
        return t
    raise argparse.ArgumentTypeError(
        f"{text!r} is not earliest, latest or a time in epoch milliseconds (0..{INT64_MAX})"
    )


@dataclass(frozen=True)
class _Log:
    """What a broker says of one partition's log for the change."""

    earliest: int
    latest: int
    at_time: int | None  # the offset of ``--to TIME_MS`` (None: no segment that old)
    #: why an explicit offset inside the log is not where a message starts (None: it is)
    not_a_message: str | None = None


def _logs(conn: BrokerConnection, args: argparse.Namespace, broker: int, parts: list[int],
          time_ms: int | None, given: Mapping[Key, int] | None) -> dict[int, _Log]:
    from kafka_pyspark.client import before_time

    out = {}
    for p, lo, hi in broker_offsets(conn, args.topic, parts):
        at = None if time_ms is None else before_time(conn, args.topic, p, time_ms)
        log = _Log(lo, hi, at)
        new = None if given is None else given[(broker, p)]
        if new is not None and log.earliest < new < log.latest and not args.force:
            log = replace(log, not_a_message=_not_a_message(conn, args.topic, p, new))
        out[p] = log
    return out


def _not_a_message(conn: BrokerConnection, topic: str, partition: int, offset: int
                   ) -> str | None:
    """Why no whole message with a right CRC starts at ``offset`` (None if one does): 0.7's
    consumer fails on an offset that is not a message's start."""
    from kafka_pyspark.client import FetchSettings, iter_range

    try:
        for _ in iter_range(conn, topic, partition, offset, offset + 1,
                            FetchSettings(fetch_size=BOUNDARY_FETCH_SIZE)):
            break
    except MessageError as e:
        return str(e)
    return None


def plan_changes(cluster: Cluster, registry: Registry, args: argparse.Namespace,
                 given: Mapping[Key, int] | None) -> list[OffsetChange]:
    """The new offset of every broker-partition concerned (asks the brokers its bounds):
    ``given`` ones (``--offsets``, ``--import``), else those of ``--to``."""
    brokers = live_brokers(cluster)
    live = registered_partitions(cluster, args.topic) if given is None else \
        cluster.partitions(args.topic)
    keys = sorted(given) if given is not None else live
    time_ms = int(args.to) if args.to is not None and args.to.isdigit() else None
    # a broker closes the connection when asked of a partition it does not have
    asked = by_broker(k for k in keys if k in live)
    # each partition: its bounds, then a time's offset or the message at an explicit offset
    requests = {b: n + len(asked[b]) for b, n in offsets_requests(asked).items()}
    answers, failed = ask_each({b: brokers[b] for b in asked},
                               lambda conn, b: _logs(conn, args, b, asked[b], time_ms, given),
                               args.timeout_ms, requests)
    current, malformed = registry.group_offsets_checked(args.group, args.topic)
    bad = malformed_by_key(malformed)
    changes = []
    for key in keys:
        if key[0] in failed:
            e = failed[key[0]]
            raise CliError(f"cannot set {bp(key)}: {e}", exit_code_for(e))
        got = answers.get(key[0])
        log = got.get(key[1]) if got is not None else None
        if log is None and not args.force:
            raise CliError(_not_live(args.topic, key, brokers, live), EXIT_DATA)
        new = _new_offset(args, key, given, log)
        changes.append(OffsetChange(*key, current.get(key), new,
                                    None if log is None else log.earliest,
                                    None if log is None else log.latest, bad.get(key)))
    return changes


def _not_live(topic: str, key: Key, brokers: Mapping[int, object], live: list[Key]) -> str:
    why = (f"broker {key[0]} is not live" if key[0] not in brokers
           else f"topic {topic!r} has no partition {bp(key)} registered in ZooKeeper")
    return (f"{bp(key)}: {why} (live partitions: {', '.join(map(bp, live)) or 'none'}), so "
            "the offset cannot be checked against its log (--force sets it anyway)")


def _new_offset(args: argparse.Namespace, key: Key, given: Mapping[Key, int] | None,
                log: _Log | None) -> int:
    if given is not None:
        new = given[key]
        if log is None or args.force:
            return new
        if not log.earliest <= new <= log.latest:
            raise CliError(f"{bp(key)}: offset {new} is outside the log [{log.earliest}, "
                           f"{log.latest}] (--force sets it anyway)", EXIT_DATA)
        if log.not_a_message is not None:
            raise CliError(f"{bp(key)}: offset {new} is not where a message starts "
                           f"({log.not_a_message}); 0.7's consumer would fail there (--force "
                           "sets it anyway)", EXIT_DATA)
        return new
    assert log is not None  # --to: only live partitions
    if args.to == "earliest":
        return log.earliest
    if args.to == "latest":
        return log.latest
    return log.earliest if log.at_time is None else log.at_time  # none that old: all newer


def live_consumers(registry: Registry, group: str, topic: str) -> list[str]:
    """What shows the group is running: registered consumer ids and owner nodes."""
    ids = [f"consumer {c}" for c in registry.consumer_ids(group)]
    owners = [f"owner of {bp(k)}: {o}" for k, o in registry.group_owners(group, topic).items()]
    return ids + owners


def cmd_set(args: argparse.Namespace) -> int:
    """--to / --offsets: one topic's offsets planned, checked and written."""
    modes = [m for m in ("to", "offsets") if getattr(args, m) not in (None, False)]
    if args.group is None or args.topic is None:
        raise CliError(f"--{modes[0]} needs --group and --topic")
    given = parse_offsets_json(args.offsets) if args.offsets is not None else None
    with open_cluster(args) as cluster:
        registry = cluster.registry()
        assert registry is not None  # --zk is required
        running = refuse_running(registry, args, [args.topic])
        changes = plan_changes(cluster, registry, args, given)
        if not args.dry_run:
            registry.commit_group_offsets(args.group, args.topic,
                                          {(c.broker, c.partition): c.new for c in changes},
                                          creator=CREATOR)
    _show(args, changes)
    return running_outcome(args, running)


#: the value kafka07 gives the parent nodes it creates (who created them)
CREATOR = f"{socket.gethostname()}-{os.getpid()}-kafka07"


def refuse_running(registry: Registry, args: argparse.Namespace, topics: list[str]) -> str:
    """What shows the group runs (``""``: nothing); refused unless ``--force`` or
    ``--dry-run`` (:func:`running_outcome` says it then)."""
    live = [x for t in topics for x in live_consumers(registry, args.group, t)]
    if not live:
        return ""
    running = (f"group {args.group!r} has live consumers ({'; '.join(dict.fromkeys(live))}): "
               "they would overwrite the new offsets on their next commit")
    if not args.force and not args.dry_run:
        raise CliError(f"{running}. Stop them first, or --force", EXIT_DATA)
    return running


def running_outcome(args: argparse.Namespace, running: str) -> int:
    """After a write (or a dry run) of a group that runs: the message and the exit code."""
    if running and not args.force:  # a dry run: the real one would be refused
        error(f"{running}. Stop them first, or --force")
        return EXIT_DATA
    if running:
        error(f"{running}; {'would be' if args.dry_run else 'was'} written anyway (--force)")
    return EXIT_OK


def _show(args: argparse.Namespace, changes: list[OffsetChange]) -> None:
    if args.json:
        json_document({"group": args.group, "topic": args.topic, "dry_run": args.dry_run,
                       "partitions": show_changes(args, args.topic, changes, as_json=True)})
    else:
        show_changes(args, args.topic, changes)


def show_changes(args: argparse.Namespace, topic: str, changes: list[OffsetChange], *,
                 as_json: bool = False) -> list[dict[str, Any]]:
    """A topic's changes as a table on stdout (``as_json``: returned as JSON rows instead),
    the nodes not in 0.7's format they replace, and the summary line."""
    if not as_json:
        table(["broker-partition", "current", "new", "change", "earliest", "latest"], [
            [bp((c.broker, c.partition)),
             "bad" if c.current_error else "-" if c.current is None else c.current, c.new,
             "-" if c.current is None else f"{c.new - c.current:+d}",
             "-" if c.earliest is None else c.earliest, "-" if c.latest is None else c.latest]
            for c in changes
        ])
    verb = "would set" if args.dry_run else "set"
    for c in changes:
        if c.current_error:
            error(f"{c.current_error}: {'would be' if args.dry_run else 'was'} overwritten")
    moved = sum(c.current != c.new for c in changes)
    summary(f"{verb} {plural(len(changes), 'offset')} of group {args.group!r} topic "
            f"{topic!r} ({moved} changed)" + (": dry run, nothing written"
                                              if args.dry_run else ""))
    return [asdict(c) for c in changes]
