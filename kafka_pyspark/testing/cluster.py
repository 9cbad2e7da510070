"""A local Kafka 0.7 cluster in one command: ZooKeeper, N embedded brokers, a chroot.

::

    kafka07 local-cluster --brokers 2 --chroot /kafka       # or:
    python -m kafka_pyspark.testing.cluster --brokers 2 --chroot /kafka

starts Debian's ZooKeeper (:class:`~kafka_pyspark.testing.ZooKeeperServer`) and ``--brokers``
:class:`~kafka_pyspark.testing.EmbeddedBroker` s (ids 0, 1, ...; ``--partitions`` each) in one
temporary directory, creates the chroot, prints the ``zk.connect`` (and the ``broker.list``) to
use, and runs until Ctrl-C (SIGINT) or SIGTERM; then it stops the brokers and ZooKeeper and
removes the directory. In Python::

    from kafka_pyspark.testing.cluster import LocalKafka

    with LocalKafka(brokers=2, chroot="/kafka") as cluster:
        spark.read.format("kafka07").option("zk.connect", cluster.zk_connect)...

Everything listens on 127.0.0.1 only: a cluster for trying things, tests and demos (the
brokers are the embedded test broker, in Python), not for production data.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from kafka_pyspark._shared.closing import Service
from kafka_pyspark.errors import KafkaError, OptionError

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

__all__ = ["DEFAULT_CHROOT", "LocalKafka", "main"]

#: the chroot a local cluster registers under unless told otherwise (as a 0.7 site's often is)
DEFAULT_CHROOT = "/kafka"
#: how the lines a client needs are printed: ``zk.connect=...`` and ``broker.list=...``
ZK_CONNECT_LINE = "zk.connect={}"
BROKER_LIST_LINE = "broker.list={}"
#: the temporary directory's name prefix
TMP_PREFIX = "kafka07-cluster-"


def _checked_chroot(chroot: str) -> str:
    """``""`` (no chroot) or ``/a/b`` without a trailing slash; else :class:`OptionError`."""
    if chroot in ("", "/"):
        return ""
    parts = chroot.split("/")
    if not chroot.startswith("/") or "" in parts[1:] or {".", ".."} & set(parts):
        raise OptionError("chroot", f"must be a ZooKeeper path such as /kafka, got {chroot!r}")
    return chroot


class LocalKafka(Service):
    """ZooKeeper and embedded 0.7 brokers (id ``i`` holds ``partitions[i]`` partitions of each
    topic), registered under ``chroot``, all in one temporary directory that :meth:`close`
    removes with everything it started."""

    def __init__(
        self,
        *,
        brokers: int = 2,
        partitions: int | Sequence[int] = 2,
        chroot: str = DEFAULT_CHROOT,
    ) -> None:
        counts = [partitions] * brokers if isinstance(partitions, int) else list(partitions)
        if brokers < 1:
            raise OptionError("brokers", f"must be >= 1, got {brokers}")
        if len(counts) != brokers or min(counts) < 1:
            raise OptionError("partitions", f"need {brokers} counts >= 1, got {partitions!r}")
        self.partitions = tuple(counts)
        self.chroot = _checked_chroot(chroot)
        self.tmp: Path | None = None
        self.zk_connect = ""
        self.brokers: list[EmbeddedBroker] = []
        self._stack = contextlib.ExitStack()

    @property
    def broker_list(self) -> str:
        """``0:127.0.0.1:port,1:...``: the ``broker.list`` option that reaches the brokers
        without ZooKeeper."""
        return ",".join(b.broker_list_entry for b in self.brokers)

    def start(self) -> LocalKafka:
        from kafka_pyspark.testing._zookeeper import ZooKeeperServer
        from kafka_pyspark.testing.broker import EmbeddedBroker

        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
            self._stack.callback(shutil.rmtree, self.tmp, True)
            zk = self._stack.enter_context(ZooKeeperServer(
                data_dir=self.tmp / "zookeeper", own_process_group=True))
            self.zk_connect = zk.create_chroot(self.chroot) if self.chroot else zk.connect_string
            for i, n in enumerate(self.partitions):
                self.brokers.append(self._stack.enter_context(EmbeddedBroker(
                    i, log_dir=self.tmp / f"broker-{i}", zk_connect=self.zk_connect,
                    num_partitions=n,
                )))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the brokers, then ZooKeeper; remove the directory (idempotent)."""
        self._stack.close()
        self.brokers = []


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run a local Kafka 0.7 cluster (ZooKeeper and embedded brokers) "
        "until Ctrl-C; prints the zk.connect to use.")
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kafka07 local-cluster`` and ``python -m kafka_pyspark.testing.cluster``."""
    p.add_argument("--brokers", type=int, default=2, help="how many brokers (default 2)")
    p.add_argument("--partitions", type=int, default=2,
                   help="partitions of each topic on each broker (num.partitions, default 2)")
    p.add_argument("--chroot", default=DEFAULT_CHROOT,
                   help=f"the ZooKeeper path the brokers register under, created first "
                   f"(default {DEFAULT_CHROOT}; / for none)")


def run(args: argparse.Namespace) -> int:
    """Start the cluster, print how to reach it, wait for SIGINT/SIGTERM, stop it."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    quiet = logging.getLogger("kafka_pyspark.testing")  # brokers report their session ending
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with LocalKafka(brokers=args.brokers, partitions=args.partitions,
                        chroot=args.chroot) as cluster:
            for b in cluster.brokers:
                print(f"broker {b.broker_id} at {b.host}:{b.port}, "
                      f"{cluster.partitions[b.broker_id]} partitions per topic")
            print(ZK_CONNECT_LINE.format(cluster.zk_connect))
            print(BROKER_LIST_LINE.format(cluster.broker_list))
            print(f"data in {cluster.tmp}; Ctrl-C stops the cluster and removes it", flush=True)
            while not stop.wait(0.5):
                pass
            print("stopping", flush=True)
        print("stopped", flush=True)
        return 0
    finally:
        quiet.setLevel(level)
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kafka_pyspark.testing.cluster``."""
    args = _parser("python -m kafka_pyspark.testing.cluster").parse_args(argv)
    try:
        return run(args)
    except KafkaError as e:
        print(f"local-cluster: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
