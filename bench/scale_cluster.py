"""A cluster of many broker-partitions for the scale benchmark (not a benchmark: no ``run``).

ZooKeeper and ``brokers`` embedded brokers, each in its own process (the driver measured in
this process shares no interpreter, so no GIL, with them), on loopback. The topics' logs are
written as segment files before the brokers start (one message per partition), so a broker
registers every topic in ZooKeeper as it starts, as 0.7.2 does for the logs it finds.

With ``hold`` (seconds), the driver reaches ZooKeeper and every broker through a
:func:`~bench.scale_proxy.delay_proxy` each (the brokers advertise their proxy's address), so
each of its round trips gains ``2 * hold``; the brokers reach ZooKeeper directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from bench.scale_proxy import delay_proxy
from kafka_pyspark.testing._zookeeper import ZooKeeperServer, free_port

START_TIMEOUT = 120.0


def write_logs(log_dir: Path, topics: Mapping[str, int], message_set: bytes) -> None:
    """``topics[t]`` partitions of each topic, each one segment holding ``message_set``."""
    from kafka_pyspark._segments.file_names import partition_dir_name, segment_file_name

    for topic, count in topics.items():
        for p in range(count):
            d = log_dir / partition_dir_name(topic, p)
            d.mkdir(parents=True)
            (d / segment_file_name(0)).write_bytes(message_set)


def _wait_registered(zk_connect: str, brokers: int, topics: Mapping[str, int]) -> None:
    """Until every broker and every topic of every broker is in ZooKeeper."""
    from kafka_pyspark._cluster import Registry
    from kafka_pyspark.errors import KafkaError

    deadline = time.monotonic() + START_TIMEOUT
    with Registry(zk_connect) as registry:
        while True:
            with contextlib.suppress(KafkaError):
                live, counts = registry.topology(list(topics))
                if len(live) == brokers and all(
                    counts[t] == dict.fromkeys(range(brokers), n) for t, n in topics.items()
                ):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the brokers did not register within {START_TIMEOUT:g} s")
            time.sleep(0.2)


def _ports(stack: contextlib.ExitStack, hold: float | None) -> list[str]:
    """A broker's listening-port arguments: a free port and, with ``hold``, its proxy's port
    advertised."""
    if hold is None:
        return ["--port", "0"]
    port = free_port()
    proxy = stack.enter_context(delay_proxy(("127.0.0.1", port), hold))
    return ["--port", str(port), "--advertised-port", str(proxy)]


@contextlib.contextmanager
def scale_cluster(
    brokers: int, topics: Mapping[str, int], hold: float | None = None
) -> Iterator[str]:
    """ZooKeeper and ``brokers`` broker processes, each holding ``topics[t]`` partitions of
    every topic ``t`` (one message each); yields the ZooKeeper connect string the driver uses
    (through a delaying proxy with ``hold``)."""
    from kafka_pyspark._messages import encode_message_set

    message_set = encode_message_set([b"x" * 100])
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-"))
        zk = stack.enter_context(ZooKeeperServer())
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for b in range(brokers):
                log_dir = Path(tmp) / f"broker-{b}"
                write_logs(log_dir, topics, message_set)
                counts = ",".join(f"{t}:{n}" for t, n in topics.items())
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "kafka_pyspark.testing.broker", *_ports(stack, hold),
                     "--broker-id", str(b), "--log-dir", str(log_dir), "--zk",
                     zk.connect_string, "--topic-partitions", counts, "--log-level", "WARNING"],
                    stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                ))
            _wait_registered(zk.connect_string, brokers, topics)
            if hold is None:
                yield zk.connect_string
            else:
                yield f"{zk.host}:{stack.enter_context(delay_proxy((zk.host, zk.port), hold))}"
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
