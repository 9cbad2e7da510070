"""``kafka07 group-offsets --export`` / ``--import FILE``: a group's committed offsets across
topics in the one JSON shape of :mod:`kafka_pyspark._admin.group_offsets` (0.7's
``ExportZkOffsets`` / ``ImportZkOffsets``). An import is checked and written as ``--offsets``
is (:mod:`kafka_pyspark.cli._group_offsets`), every topic's changes planned before anything
is written, then all written in one round.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kafka_pyspark._admin.group_offsets import (
    committed_offsets,
    offsets_document,
    parse_offsets_document,
)
from kafka_pyspark.cli._common import EXIT_DATA, EXIT_OK, CliError, open_cluster
from kafka_pyspark.cli._group_offsets import (
    CREATOR,
    OffsetChange,
    plan_changes,
    refuse_running,
    running_outcome,
    show_changes,
)
from kafka_pyspark.cli._output import error, json_document, plural, summary


def cmd_export(args: argparse.Namespace) -> int:
    if args.group is None:
        raise CliError("--export needs --group")
    topics = [t.strip() for t in args.topic.split(",") if t.strip()] if args.topic else None
    with open_cluster(args) as cluster:
        registry = cluster.registry()
        assert registry is not None  # --zk is required
        offsets, malformed = committed_offsets(registry, args.group, topics)
    json_document(offsets_document(args.group, offsets))
    for _, bad in sorted(malformed.items()):
        for why in bad.values():
            error(f"{why}: not exported")
    count = sum(len(o) for o in offsets.values())
    summary(f"exported {plural(count, 'offset')} of group {args.group!r} "
            f"({plural(len(offsets), 'topic')})")
    return EXIT_DATA if malformed else EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    where = "stdin" if args.import_file == "-" else args.import_file
    try:
        text = sys.stdin.read() if args.import_file == "-" else \
            Path(args.import_file).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read --import {where}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CliError(f"--import {where} is not UTF-8 text: {e}") from None
    group, doc = parse_offsets_document(text, f"--import {where}")
    args = argparse.Namespace(**{**vars(args), "group": args.group or group})
    with open_cluster(args) as cluster:
        registry = cluster.registry()
        assert registry is not None  # --zk is required
        running = refuse_running(registry, args, sorted(doc))
        changes: dict[str, list[OffsetChange]] = {}
        for topic in sorted(doc):  # every check passes before anything is written
            of_topic = argparse.Namespace(**{**vars(args), "topic": topic})
            changes[topic] = plan_changes(cluster, registry, of_topic, doc[topic])
        if not args.dry_run:
            registry.commit_group_offsets_of(
                args.group, {t: {(c.broker, c.partition): c.new for c in cs}
                             for t, cs in changes.items()}, creator=CREATOR)
    if args.json:
        json_document({"group": args.group, "dry_run": args.dry_run, "topics": [
            {"topic": t, "partitions": show_changes(args, t, cs, as_json=True)}
            for t, cs in changes.items()]})
    else:
        for t, cs in changes.items():
            show_changes(args, t, cs)
    return running_outcome(args, running)
