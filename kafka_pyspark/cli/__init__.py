"""``kafka07``: the operator command for Kafka 0.7 clusters, built on the connector's layers.

    kafka07 topics  --zk ZK                          brokers, topics, partitions per broker
    kafka07 offsets --zk ZK | --broker-list L --topic T   earliest/latest per broker-partition
    kafka07 lag     --zk ZK --group G [--topic T]    committed offsets vs log end
    kafka07 dump    FILE | --zk ZK --topic T --partition B-P   decode messages, show faults
    kafka07 produce --zk ZK --topic T [--codec C] [--key-separator S]   stdin lines
    kafka07 consume --zk ZK --topic T [--from earliest|latest|group|N] [--max-messages N]

Every command takes ``--json`` and ``--timeout-ms``. Exit codes: 0 ok, 1 data problem, 2 usage
or connection problem (:mod:`kafka_pyspark.cli.common`). docs/cli.md has the details.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kafka_pyspark.cli import cluster_cmds, dump, io_cmds
from kafka_pyspark.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    error,
    exit_code_for,
    quiet_libraries,
)
from kafka_pyspark.errors import KafkaError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"kafka07: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kafka07", description="Kafka 0.7 operator tool (see docs/cli.md)")
    sub: Any = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    cluster_cmds.add_parsers(sub)
    dump.add_parsers(sub)
    io_cmds.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (never raises for a domain or usage error)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    with quiet_libraries():
        try:
            rc: int = args.func(args)
            return rc
        except CliError as e:
            error(str(e))
            return e.code
        except KafkaError as e:
            error(str(e))
            return exit_code_for(e)
        except BrokenPipeError:  # `kafka07 consume ... | head`
            return EXIT_OK
        except OSError as e:  # a file that cannot be read, a socket error outside a table
            error(str(e))
            return EXIT_USAGE
        except KeyboardInterrupt:
            return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
