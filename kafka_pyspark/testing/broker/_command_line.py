"""``python -m kafka_pyspark.testing.broker``: run one embedded broker until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Sequence
from types import FrameType

from kafka_pyspark._shared import defaults
from kafka_pyspark.errors import KafkaError
from kafka_pyspark.testing.broker._core import EmbeddedBroker

log = logging.getLogger(__name__)


def _parse_topic_partitions(value: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        topic, sep, count = item.rpartition(":")
        if not sep or not count.isdigit():
            raise argparse.ArgumentTypeError(f"expected topic:count, got {item!r}")
        out[topic] = int(count)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_pyspark.testing.broker",
        description="Run an embedded Kafka 0.7.2 broker until SIGINT/SIGTERM.",
    )
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--advertised-host", default=None,
                        help="host registered in ZooKeeper (default: --host)")
    parser.add_argument("--advertised-port", type=int, default=None,
                        help="port registered in ZooKeeper (default: the listening port)")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--broker-id", type=int, default=0)
    parser.add_argument("--zk", default=None, help="HOST:PORT[,HOST:PORT][/chroot]")
    parser.add_argument("--partitions", type=int, default=1, help="num.partitions")
    parser.add_argument("--topic-partitions", type=_parse_topic_partitions, default={},
                        help="per-topic partition counts, topic:count,...")
    parser.add_argument("--log-file-size", type=int, default=1 << 30)
    parser.add_argument("--flush-interval", type=int, default=1, help="messages")
    parser.add_argument("--flush-interval-ms", type=int, default=3000)
    parser.add_argument("--max-message-size", type=int, default=defaults.MAX_MESSAGE_SIZE)
    parser.add_argument("--zk-session-timeout", type=float, default=6.0, help="seconds")
    parser.add_argument("--zk-connection-timeout", type=float, default=6.0, help="seconds")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        broker = EmbeddedBroker(
            args.broker_id,
            host=args.host,
            port=args.port,
            advertised_host=args.advertised_host,
            advertised_port=args.advertised_port,
            log_dir=args.log_dir,
            zk_connect=args.zk,
            num_partitions=args.partitions,
            topic_partitions=args.topic_partitions,
            log_file_size=args.log_file_size,
            flush_interval=args.flush_interval,
            flush_interval_ms=args.flush_interval_ms,
            max_message_size=args.max_message_size,
            zk_session_timeout=args.zk_session_timeout,
            zk_connection_timeout=args.zk_connection_timeout,
        ).start()
    except KafkaError as e:
        log.error("%s", e)
        return 1
    try:
        while not stop.wait(1.0):
            pass
    finally:
        broker.stop()
    return 0
