"""``kafka07 group-offsets --export`` / ``--import FILE``: a group's committed offsets across
topics in the one JSON shape of :mod:`kafka_pyspark._admin.group_offsets` (0.7's
``ExportZkOffsets`` / ``ImportZkOffsets``). An import is checked and written as ``--offsets``
is (:mod:`kafka_pyspark.cli._group_offsets`), every topic's changes planned before anything
is written, then all written in one round. Also the command's parser and the dispatch of
its modes (``--to``/``--offsets``: :func:`~kafka_pyspark.cli._group_offsets.cmd_set`).
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
from kafka_pyspark.cli._common import EXIT_DATA, EXIT_OK, CliError, add_cluster_args, open_cluster
from kafka_pyspark.cli._group_offsets import (
    CREATOR,
    OffsetChange,
    cmd_set,
    parse_target,
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


def cmd_group_offsets(args: argparse.Namespace) -> int:
    modes = [m for m in ("to", "offsets", "export", "import_file")
             if getattr(args, m) not in (None, False)]
    if len(modes) != 1:
        raise CliError("give exactly one of --to earliest|latest|TIME_MS, --offsets JSON, "
                       "--export and --import FILE")
    if modes[0] in ("export", "import_file"):
        return (cmd_export if args.export else cmd_import)(args)
    return cmd_set(args)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "group-offsets",
        help="set a consumer group's committed offsets (like 0.7's UpdateOffsetsInZK)",
        description="Set the committed offsets of GROUP for TOPIC, as 0.7's consumer writes "
        "them (/consumers/GROUP/offsets/TOPIC/BROKER-PARTITION, decimal). Refused while the "
        "group has live consumers unless --force. --dry-run shows the change only.",
    )
    add_cluster_args(p, broker_list=False)
    p.add_argument("--group", help="the consumer group (group.id); with --import: another "
                   "group than the file's")
    p.add_argument("--topic", help="the topic whose offsets to set (--to, --offsets); with "
                   "--export: comma-separated topics (default: all the group committed)")
    p.add_argument("--to", type=parse_target, metavar="earliest|latest|TIME_MS",
                   help="every live partition of the topic to its earliest or latest offset, "
                   "or to the start of the newest segment last written before TIME_MS (epoch "
                   "milliseconds; 0.7 knows time per segment file; none that old: earliest)")
    p.add_argument("--offsets", metavar="JSON",
                   help='explicit offsets, {"brokerId-partition": offset, ...}; each must be '
                   "where a message starts (or the log end) on a live partition of the topic, "
                   "unless --force")
    p.add_argument("--export", action="store_true",
                   help='print the offsets GROUP committed, all its topics, as one JSON '
                   'document {"group": G, "offsets": {topic: {"brokerId-partition": offset}}} '
                   "(like 0.7's ExportZkOffsets)")
    p.add_argument("--import", dest="import_file", metavar="FILE",
                   help="set the offsets of such a document (- for stdin), every topic in it, "
                   "with the checks of --offsets (like 0.7's ImportZkOffsets)")
    p.add_argument("--dry-run", action="store_true",
                   help="show what would change, write nothing")
    p.add_argument("--force", action="store_true",
                   help="write anyway: while the group has live consumers, and --offsets "
                   "outside the log, not where a message starts or on a partition not live")
    p.set_defaults(func=cmd_group_offsets)
