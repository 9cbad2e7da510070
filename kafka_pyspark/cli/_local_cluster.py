"""``kafka07 local-cluster``: ZooKeeper and embedded 0.7 brokers on this machine until Ctrl-C
(:mod:`kafka_pyspark.testing.cluster`)."""

from __future__ import annotations

import argparse

from kafka_pyspark.testing import cluster


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "local-cluster",
        help="run ZooKeeper and embedded 0.7 brokers here until Ctrl-C; prints the zk.connect",
        description="Run a local Kafka 0.7 cluster for trying things and tests: Debian's "
        "ZooKeeper and embedded 0.7 brokers on 127.0.0.1, the chroot created; prints the "
        "zk.connect and broker.list to use; Ctrl-C stops everything and removes its data.",
    )
    cluster.add_arguments(p)
    p.set_defaults(func=cluster.run)
