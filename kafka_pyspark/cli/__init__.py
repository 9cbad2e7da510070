"""``kafka07``: the operator command for Kafka 0.7 clusters, built on the connector's layers.

    kafka07 topics  --zk ZK                          brokers, topics, partitions per broker
    kafka07 offsets --zk ZK | --broker-list L --topic T   earliest/latest per broker-partition
    kafka07 lag     --zk ZK --group G [--topic T]    committed offsets, owners, lag, totals
    kafka07 group-offsets --zk ZK --group G --topic T --to earliest|latest|TIME|--offsets M
    kafka07 group-offsets --zk ZK --group G --export | --import FILE   all topics, one JSON
    kafka07 dump    FILE|DIR... | --zk ZK --topic T --partition B-P   messages and their facts
    kafka07 produce --zk ZK --topic T [--codec C] [--key-separator S]   stdin lines
    kafka07 consume --zk ZK --topic T [--from earliest|latest|group|N | --start B-P=N,...]
    kafka07 local-cluster [--brokers N] [--chroot /kafka]   ZooKeeper + brokers here, until Ctrl-C

Every command takes ``--json`` and ``--timeout-ms``. Exit codes: 0 ok, 1 data problem, 2 usage
or connection problem (:mod:`kafka_pyspark.cli._common`). The help of each command is
complete; the manual, docs/cli.md, is installed beside this module (:data:`MANUAL`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_pyspark import __version__
from kafka_pyspark._shared.partition_key import check_group_id
from kafka_pyspark.cli import _cluster_cmds as cluster_cmds
from kafka_pyspark.cli import _consume as consume
from kafka_pyspark.cli import _dump as dump
from kafka_pyspark.cli import _lag as lag
from kafka_pyspark.cli import _local_cluster as local_cluster
from kafka_pyspark.cli import _offsets_io as group_offsets
from kafka_pyspark.cli import _produce as produce
from kafka_pyspark.cli._common import (
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    exit_code_for,
    permission_advice,
    quiet_libraries,
)
from kafka_pyspark.cli._output import error
from kafka_pyspark.errors import KafkaError, RegistryPermissionError

__all__ = ["main"]

#: docs/cli.md, installed with the package (package data)
MANUAL = Path(__file__).with_name("cli.md")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"kafka07: {message}\n")


class _Version(argparse.Action):
    """``--version``: the version, then which engine decodes and encodes each codec here
    (compiled kernels or their pure-Python twins: :mod:`kafka_pyspark.cli._engines`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from kafka_pyspark.cli._engines import codec_engines

        rows = codec_engines()
        width = max(len(what) for what, _ in rows) + 1
        lines = [f"kafka07 (kafka_pyspark) {__version__}"]
        lines += [f"{what + ':':<{width}} {engine}" for what, engine in rows]
        sys.stdout.write("\n".join(lines) + "\n")
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kafka07",
        description="Kafka 0.7 operator tool; `kafka07 COMMAND --help` for a command's options.\n"
        "Broker-partitions are written brokerId-partition (0-1); offsets are 0.7's byte "
        "offsets.",
        epilog=f"{EXIT_CODES_HELP}\n\nThe manual (docs/cli.md) is installed at {MANUAL}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_Version, nargs=0,
                   help="print the version, the engine and the codecs in use, and exit")
    sub: Any = p.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                metavar="COMMAND")
    cluster_cmds.add_parsers(sub)
    lag.add_parsers(sub)
    group_offsets.add_parsers(sub)
    dump.add_parsers(sub)
    produce.add_parsers(sub)
    consume.add_parsers(sub)
    local_cluster.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (never raises for a domain or usage error)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    with quiet_libraries():
        try:
            if getattr(args, "group", None) is not None:  # refused before any request, as
                check_group_id(args.group)  # the group.id option is when options are parsed
            rc: int = args.func(args)
            return rc
        except CliError as e:
            error(str(e))
            return e.code
        except RegistryPermissionError as e:
            error(permission_advice(e))
            return exit_code_for(e)
        except KafkaError as e:
            error(str(e))
            return exit_code_for(e)
        except BrokenPipeError:  # `kafka07 consume ... | head`: the reader has what it wanted
            _drop_stdout()
            return EXIT_OK
        except OSError as e:  # a file that cannot be read, a socket error outside a table
            error(str(e))
            return EXIT_USAGE
        except KeyboardInterrupt:
            error("interrupted")
            return EXIT_INTERRUPTED


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is still
    buffered does not fail on the closed pipe again (and print "Exception ignored")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
