"""``kafka07``: small operator tool for Kafka 0.7 clusters, built on the connector's layers.

    kafka07 offsets --zk HOST:PORT[/chroot] --topic T          earliest/latest per broker-partition
    kafka07 lag --zk HOST:PORT[/chroot] --group G --topic T    group offsets vs latest (like 0.7's
                                                               ConsumerOffsetChecker)
    kafka07 dump SEGMENT_FILE [--values]                       decode a .kafka segment file

``--broker-list id:host:port,...`` replaces ``--zk`` for ``offsets``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kafka_pyspark.errors import KafkaError

_DUMP_CHUNK = 8 << 20


def cmd_offsets(args: argparse.Namespace) -> int:
    from kafka_pyspark.client import BrokerConnection
    from kafka_pyspark.client.offsets import earliest, latest
    from kafka_pyspark.cluster import Cluster

    with Cluster(
        zk_connect=args.zk, broker_list=args.broker_list, socket_timeout_ms=args.timeout_ms
    ) as cluster:
        brokers = cluster.brokers()
        parts = cluster.partitions(args.topic)
        if not parts:
            print(f"topic {args.topic!r}: no partitions found", file=sys.stderr)
            return 1
        print(f"{'broker-partition':<18}{'earliest':>16}{'latest':>16}{'bytes':>16}")
        for broker_id, partition in parts:
            b = brokers[broker_id]
            with BrokerConnection(b.host, b.port, timeout=args.timeout_ms / 1000) as conn:
                lo = earliest(conn, args.topic, partition)
                hi = latest(conn, args.topic, partition)
            print(f"{f'{broker_id}-{partition}':<18}{lo:>16}{hi:>16}{hi - lo:>16}")
    return 0


def cmd_lag(args: argparse.Namespace) -> int:
    from kafka_pyspark.client import BrokerConnection
    from kafka_pyspark.client.offsets import latest
    from kafka_pyspark.cluster import Cluster

    with Cluster(zk_connect=args.zk, socket_timeout_ms=args.timeout_ms) as cluster:
        registry = cluster.registry()
        if registry is None:  # pragma: no cover - zk_connect is required by argparse
            raise KafkaError("lag needs --zk")
        committed = registry.group_offsets(args.group, args.topic)
        brokers = cluster.brokers()
        print(f"{'group':<16}{'broker-partition':<18}{'offset':>16}{'latest':>16}{'lag':>16}")
        for broker_id, partition in cluster.partitions(args.topic):
            b = brokers[broker_id]
            with BrokerConnection(b.host, b.port, timeout=args.timeout_ms / 1000) as conn:
                hi = latest(conn, args.topic, partition)
            pos = committed.get((broker_id, partition))
            shown = "-" if pos is None else str(pos)
            lag = "-" if pos is None else str(hi - pos)
            print(f"{args.group:<16}{f'{broker_id}-{partition}':<18}{shown:>16}{hi:>16}{lag:>16}")
    return 0


def cmd_dump(args: argparse.Namespace) -> int:
    from kafka_pyspark.messages import decode_message_set

    name = os.path.basename(args.file)
    stem = name.split(".", 1)[0]
    base = int(stem) if stem.isdigit() else 0
    pos = base
    with open(args.file, "rb") as f:
        data = f.read(_DUMP_CHUNK)
        carry = b""
        while data or carry:
            buf = carry + data
            res = decode_message_set(buf, pos, verify_crc=not args.no_verify)
            cols = res.batch.to_pydict()
            for i in range(res.batch.num_rows):
                value = cols["value"][i]
                line = (
                    f"offset={cols['offset'][i]} next={cols['next_offset'][i]} "
                    f"inner={cols['inner_index'][i]} codec={cols['compression'][i]} "
                    f"size={len(value)}"
                )
                if args.values:
                    line += f" value={value!r}"
                print(line)
            pos = res.next_offset
            carry = buf[res.bytes_consumed :]
            data = f.read(_DUMP_CHUNK)
            if not data:
                if carry:
                    print(
                        f"torn tail: {len(carry)} bytes at offset {pos} are not a whole message",
                        file=sys.stderr,
                    )
                    return 1
                break
    print(f"end offset {pos}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka07", description="Kafka 0.7 operator tool")
    sub = p.add_subparsers(dest="command", required=True)

    o = sub.add_parser("offsets", help="earliest/latest offsets per broker-partition")
    where = o.add_mutually_exclusive_group(required=True)
    where.add_argument("--zk", help="ZooKeeper connect string host:port[/chroot]")
    where.add_argument("--broker-list", help="id:host:port,...")
    o.add_argument("--topic", required=True)
    o.add_argument("--timeout-ms", type=int, default=30000)
    o.set_defaults(func=cmd_offsets)

    lag = sub.add_parser("lag", help="consumer-group offsets and lag (ZooKeeper)")
    lag.add_argument("--zk", required=True)
    lag.add_argument("--group", required=True)
    lag.add_argument("--topic", required=True)
    lag.add_argument("--timeout-ms", type=int, default=30000)
    lag.set_defaults(func=cmd_lag)

    d = sub.add_parser("dump", help="decode a .kafka segment file")
    d.add_argument("file")
    d.add_argument("--values", action="store_true", help="print payloads")
    d.add_argument("--no-verify", action="store_true", help="skip CRC checks")
    d.set_defaults(func=cmd_dump)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rc: int = args.func(args)
        return rc
    except KafkaError as e:
        print(f"kafka07: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
