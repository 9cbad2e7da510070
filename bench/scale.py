"""Driver cost at scale: planning a batch read and a stream's ``latestOffset`` over N
broker-partitions, N = 1,000 and 10,000 (``SIZES``), and how they grow with N.

Cluster (:mod:`bench.scale_cluster`): ZooKeeper and ``BROKERS`` embedded brokers, each its own
process, on loopback (no added network latency); per N one topic of N / ``BROKERS`` partitions
on every broker, each partition holding one message. Measured in this process (the driver),
median of ``REPEAT`` runs:

* ``scale.plan.<N>``: :func:`~kafka_pyspark._spark.read.batch.plan_batch` for ``subscribe`` of the
  topic, as a batch read's ``partitions()`` runs it: the registry, OFFSETS of every
  broker-partition, starts and ends, planning (a fresh ZooKeeper session and fresh broker
  connections each time).
* ``scale.latest_offset.<N>``: one ``latestOffset`` of a stream over the topic that is already
  running (its connections open), with no new data: the cost a micro-batch pays before Spark
  can decide there is nothing to do.
* ``scale.<step>.<N>.driver_cpu``: the CPU time of this process (all its threads) meanwhile:
  the driver's own work, without the brokers' (which, embedded and in Python, answer OFFSETS
  far slower than a 0.7 broker, and share the machine's cores with the driver).
* ``scale.<step>.growth`` (wall) and ``.growth.driver_cpu``: the figure at the largest N over
  the one at the smallest; linear cost grows by the ratio of the sizes (10), quadratic by its
  square.

On a machine shared with other work the figures move by tens of percent from run to run; the
growth factors compare runs made minutes apart.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from bench.results import Recorder
from bench.scale_cluster import scale_cluster

BROKERS = 4
SIZES = (1_000, 10_000)
REPEAT = 3


def _topic(n: int) -> str:
    return f"scale-{n}"


def median_time(fn: Callable[[], object], repeat: int = REPEAT) -> tuple[float, float]:
    """Median wall time and median CPU time of this process (the driver: all its threads) of
    ``repeat`` calls of ``fn`` (seconds), after one warm-up call."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def plan_time(zk_connect: str, options: dict[str, str]) -> tuple[float, float]:
    """:func:`median_time` of a batch read's planning."""
    from kafka_pyspark._options import parse_read_options
    from kafka_pyspark._spark.read.batch import plan_batch

    opts = parse_read_options({"zk.connect": zk_connect, **options}, "batch")
    return median_time(lambda: plan_batch(opts))


def latest_offset_time(zk_connect: str, options: dict[str, str]) -> tuple[float, float]:
    """:func:`median_time` of a running stream's ``latestOffset`` when nothing moved."""
    from kafka_pyspark._spark.compat import ReadAllAvailable
    from kafka_pyspark._spark.schema import READ_SCHEMA
    from kafka_pyspark._spark.stream.reader import Kafka07StreamReader

    reader = Kafka07StreamReader({"zk.connect": zk_connect, **options}, READ_SCHEMA)
    limit = ReadAllAvailable()
    try:
        at = [reader.initialOffset()]

        def micro_batch() -> None:  # Spark starts the next one where the last one ended
            at.append(reader.latestOffset(at.pop(), limit))

        return median_time(micro_batch)
    finally:
        reader.stop()


def run(recorder: Recorder) -> None:
    found: dict[str, dict[int, tuple[float, float]]] = {"plan": {}, "latest_offset": {}}
    with scale_cluster(BROKERS, {_topic(n): n // BROKERS for n in SIZES}) as zk:
        for n in SIZES:
            options = {"subscribe": _topic(n), "startingOffsets": "earliest"}
            found["plan"][n] = plan_time(zk, options)
            found["latest_offset"][n] = latest_offset_time(zk, options)
    lo, hi = min(SIZES), max(SIZES)
    for step, by_n in found.items():
        for n, (wall, cpu) in by_n.items():
            note = f"{n} broker-partitions on {BROKERS} brokers, loopback"
            recorder.record(f"scale.{step}.{n}", wall * 1000, "ms", note=note)
            recorder.record(f"scale.{step}.{n}.driver_cpu", cpu * 1000, "ms", note=note)
        for what, i in (("", 0), (".driver_cpu", 1)):
            growth = by_n[hi][i] / by_n[lo][i]
            recorder.record(f"scale.{step}.growth{what}", growth, "x",
                            target=f"<= ~{hi // lo} (linear in N)")
            print(f"   {step}{what or ' (wall)'}: {by_n[lo][i] * 1000:.0f} ms at N={lo}, "
                  f"{by_n[hi][i] * 1000:.0f} ms at N={hi}: x{growth:.1f}", flush=True)
