"""What every ``kafka07`` command shares: exit codes, arguments, the cluster (with ZooKeeper
credentials). The rows the commands show are made below them (:mod:`kafka_pyspark._admin`:
every broker asked at once, each under its own deadline). Exit codes: :data:`EXIT_CODES_HELP`
(also in docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from kafka_pyspark._cluster.zk_auth import (
    ZK_AUTH_ENV,
    credentials_from_environment,
    credentials_from_file,
)
from kafka_pyspark._shared.partition_key import (
    not_a_partition_key,
    parse_partition_key,
    partition_key,
)
from kafka_pyspark.errors import (
    KafkaError,
    MessageError,
    RegistryPermissionError,
    TopicNotFoundError,
)

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster
    from kafka_pyspark.client import BrokerConnection

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2
#: Ctrl-C (128 + SIGINT, as a shell reports it): not everything asked for was done
EXIT_INTERRUPTED = 130
EXIT_CODES_HELP = f"""exit codes:
  {EXIT_OK}  everything asked for was done and shown
  {EXIT_DATA}  a data problem: unknown topic, corrupt or torn data, a committed offset past
     the log end or not in 0.7's format, a group with live consumers or an offset that is
     not where a message starts (group-offsets)
  {EXIT_USAGE}  a usage or connection problem: bad arguments, a missing file, ZooKeeper or a
     broker unreachable or timed out, no brokers registered (wrong chroot), a ZooKeeper ACL
     refusing access
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); consume --follow stops this way with its own code
A table with some rows in error still shows every row; the exit code is the worst one seen."""

#: each broker request's (and the ZooKeeper connection's) deadline unless ``--timeout-ms`` says
#: otherwise
DEFAULT_TIMEOUT_MS = 10000

#: library loggers whose retry chatter would drown the one clear error a command prints
_QUIET_LOGGERS = (
    "kazoo", "kafka_pyspark.client", "kafka_pyspark._cluster.registry", "kafka_pyspark._write"
)


class CliError(Exception):
    """A command cannot go on: ``message`` goes to stderr, ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def exit_code_for(e: KafkaError) -> int:
    """Data problems (bad bytes, unknown topic, a group that committed nothing) are 1;
    configuration and connection are 2."""
    from kafka_pyspark._admin.lag import NothingCommittedError

    if isinstance(e, (MessageError, TopicNotFoundError, NothingCommittedError)):
        return EXIT_DATA
    return EXIT_USAGE


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence kazoo's "Connection dropped" lines and the client's retry warnings meanwhile."""
    saved = [(lg, lg.level) for lg in map(logging.getLogger, _QUIET_LOGGERS)]
    for lg, _ in saved:
        lg.setLevel(logging.CRITICAL + 1)  # children (kazoo.client, ...) inherit it
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


# --- arguments -----------------------------------------------------------------------------


def add_cluster_args(
    p: argparse.ArgumentParser, *, broker_list: bool = True, required: bool = True
) -> None:
    """``--zk`` (or ``--broker-list``), ``--timeout-ms``, ``--json``."""
    if broker_list:
        where = p.add_mutually_exclusive_group(required=required)
        where.add_argument("--zk", help="ZooKeeper connect string host:port[,...][/chroot]")
        where.add_argument("--broker-list", help="static brokers id:host:port[,...]")
    else:
        p.add_argument("--zk", required=True, help="ZooKeeper connect string host:port[/chroot]")
    p.add_argument(
        "--zk-auth-file", metavar="PATH",
        help=f"ZooKeeper digest credentials for ACL-protected nodes: a file holding one line "
        f"user:password (never on the command line; the environment variable {ZK_AUTH_ENV} "
        "holds the same, the file wins)",
    )
    add_common_args(p)


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout-ms", type=positive_int, default=DEFAULT_TIMEOUT_MS,
        help=f"deadline of each broker request and for connecting to ZooKeeper "
             f"(default {DEFAULT_TIMEOUT_MS})",
    )
    p.add_argument("--json", action="store_true",
                   help="machine-readable output on stdout (JSON); messages stay on stderr")


def positive_int(text: str) -> int:
    n = _integer(text)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return n


def non_negative_int(text: str) -> int:
    n = _integer(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative (byte offsets start at 0)")
    return n


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def parse_broker_partition(text: str) -> tuple[int, int]:
    """``"0-1"`` -> (0, 1): a broker-partition as 0.7 names it."""
    key = parse_partition_key(text.strip())
    if key is None:
        raise argparse.ArgumentTypeError(not_a_partition_key(text))
    return key


def bp(key: tuple[int, int]) -> str:
    return partition_key(*key)


# --- the cluster ---------------------------------------------------------------------------


def zk_credentials(args: argparse.Namespace) -> tuple[str, str] | None:
    """``--zk-auth-file``, else :data:`ZK_AUTH_ENV`, else None (only with ``--zk``)."""
    path = getattr(args, "zk_auth_file", None)
    if args.zk is None:
        if path is not None:
            raise CliError("--zk-auth-file needs --zk (credentials for ZooKeeper)")
        return None
    return credentials_from_file(path) if path is not None else credentials_from_environment()


def cluster_settings(args: argparse.Namespace) -> dict[str, str]:
    """The connector's cluster options the arguments stand for (credentials aside:
    :func:`zk_credentials`). ``--timeout-ms`` bounds each broker request and the ZooKeeper
    connect (handshake included)."""
    where = {"zk.connect": args.zk, "broker.list": getattr(args, "broker_list", None)}
    timeout = str(args.timeout_ms)
    return {**{k: v for k, v in where.items() if v is not None}, "socket.timeout.ms": timeout,
            "zk.connectiontimeout.ms": timeout}


def open_cluster(args: argparse.Namespace) -> Cluster:
    from kafka_pyspark._cluster import Cluster, parse_cluster_options

    options = parse_cluster_options(cluster_settings(args))
    return Cluster(dataclasses.replace(options, zk_auth=zk_credentials(args)))


def permission_advice(e: RegistryPermissionError) -> str:
    """A ZooKeeper ACL refusal, with the command's own way to pass credentials."""
    if not e.denied:
        return str(e)
    how = (
        "the credentials given lack that permission" if e.credentials_given
        else "no credentials were given: kafka07 takes them from --zk-auth-file PATH or the "
        f"environment variable {ZK_AUTH_ENV}, one line 'user:password'"
    )
    return f"{e.denied} ({how})"


def require_live(brokers: Mapping[int, BrokerAddress], keys: Iterable[tuple[int, int]]) -> None:
    """Every broker named by a ``(broker, partition)`` key is live, else a usage error."""
    for broker_id, _ in keys:
        if broker_id not in brokers:
            raise CliError(f"broker {broker_id} is not live (live: {sorted(brokers)})")


def broker_connection(broker_id: int, address: BrokerAddress, timeout_ms: int) -> BrokerConnection:
    """A connection for a command: ``timeout_ms`` per request and no retries, so a hung or
    unreachable broker costs one timeout, not four."""
    from kafka_pyspark.client._brokers import ConnectionSettings, open_connection

    return open_connection(broker_id, address.host, address.port,
                           ConnectionSettings(timeout=timeout_ms / 1000.0, retries=0))


def worst(codes: Sequence[int]) -> int:
    return max(codes, default=EXIT_OK)
