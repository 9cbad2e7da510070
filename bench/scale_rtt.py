"""Driver cost at scale with and without network latency: ``python -m bench scale_rtt``.

Run by name only (``make bench`` skips it: it takes minutes). The cluster is
:mod:`bench.scale`'s (ZooKeeper and ``BROKERS`` embedded brokers, one topic per N of
N / ``BROKERS`` partitions on every broker, one message each), started once per round-trip
time in ``RTTS_MS``: at 0 the driver (this process) reaches it on loopback; otherwise through
a :mod:`bench.scale_proxy` in front of ZooKeeper and of every broker (the brokers advertise
the proxy's address), holding each chunk half the round trip. The round trip is measured
first with a 64-byte ping-pong through such a proxy, and the hold chosen so that it comes
out at the wanted figure (the proxy's own cost included).

Per N in ``SIZES``, wall time, median of ``REPEAT`` (after one warm-up where noted):

* ``plan``: a batch read's planning, as :func:`bench.scale.plan_time` (warm-up);
* ``latest_offset``: a running stream's ``latestOffset`` with nothing new, as
  :func:`bench.scale.latest_offset_time` (warm-up);
* ``first_commit``: ``commitToGroup``'s first commit, writing all N offsets of a new group
  (a stream's ``commit`` of its first micro-batch's end; a new group each time, no warm-up);
* ``lag``: ``kafka07 lag`` of such a group, in this process (no interpreter start-up; the
  output goes nowhere) (warm-up);
* ``lag_command``: the same as a command (``python -m kafka_pyspark.cli lag ...``, what a
  user waits for: interpreter start-up and imports included; its CPU time is not this
  process's, so its driver CPU figure is 0).

Rows: ``scale_rtt.<step>.<N>.rtt<ms>`` (ms), the same ``.driver_cpu`` (the CPU time of this
process, all its threads, meanwhile), ``scale_rtt.rtt<ms>.measured`` (us). The load
average of the machine before and after each round-trip time is printed and kept in the
rows' notes: the figures are only comparable between runs that saw a similar load.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping

from bench.results import Recorder
from bench.scale import BROKERS, REPEAT, latest_offset_time, median_time, plan_time
from bench.scale_cluster import scale_cluster
from bench.scale_proxy import ping_pong_rtt

#: ``python -m bench`` runs this module only when it is named
RUN_BY_NAME_ONLY = True

SIZES = (100, 1_000, 10_000)
RTTS_MS = (0.0, 0.5)
COMMAND_TIMEOUT = 300.0
STEPS = ("plan", "latest_offset", "first_commit", "lag", "lag_command")


def _topic(n: int) -> str:
    return f"scale-rtt-{n}"


def _options(n: int) -> dict[str, str]:
    return {"subscribe": _topic(n), "startingOffsets": "earliest"}


def hold_for(rtt: float) -> float:
    """The proxy's hold (seconds) that makes a ping-pong through it take ``rtt`` seconds: the
    proxy's own cost taken off, then corrected once by what a ping-pong measures with it."""
    hold = max(0.0, (rtt - ping_pong_rtt(0.0)) / 2)
    return max(0.0, hold + (rtt - ping_pong_rtt(hold)) / 2)


def first_commit(
    zk_connect: str, options: dict[str, str], label: str
) -> tuple[float, float, str]:
    """The wall and CPU time of a new group's first ``commitToGroup`` (every offset the read
    of ``options`` covers), and the group (named after ``label``)."""
    from kafka_pyspark._spark.compat import ReadAllAvailable
    from kafka_pyspark._spark.schema import READ_SCHEMA
    from kafka_pyspark._spark.stream.reader import Kafka07StreamReader

    group = f"bench-{label}-{uuid.uuid4().hex[:8]}"
    reader = Kafka07StreamReader({"zk.connect": zk_connect, **options, "commitToGroup": "true",
                                  "group.id": group}, READ_SCHEMA)
    try:
        end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        start, start_cpu = time.perf_counter(), time.process_time()
        reader.commit(end)
        return time.perf_counter() - start, time.process_time() - start_cpu, group
    finally:
        reader.stop()


def lag_command(zk_connect: str, group: str) -> Callable[[], object]:
    """``kafka07 lag --zk ... --group ...``, its output (table and summary) discarded."""
    from kafka_pyspark.cli import main

    def lag() -> None:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["lag", "--zk", zk_connect, "--group", group])
        if code != 0:
            raise RuntimeError(f"kafka07 lag exited with {code}")

    return lag


def lag_process(zk_connect: str, group: str) -> Callable[[], object]:
    """``kafka07 lag`` as a command of its own, its output discarded."""

    def lag() -> None:
        subprocess.run([sys.executable, "-m", "kafka_pyspark.cli", "lag", "--zk", zk_connect,
                        "--group", group], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, timeout=COMMAND_TIMEOUT)

    return lag


def measure(
    zk_connect: str, options: dict[str, str], label: str
) -> dict[str, tuple[float, float]]:
    """Every step's median wall and driver CPU time (seconds) reading ``options``."""
    found = {"plan": plan_time(zk_connect, options),
             "latest_offset": latest_offset_time(zk_connect, options)}
    commits = [first_commit(zk_connect, options, label) for _ in range(REPEAT)]
    found["first_commit"] = (statistics.median(c[0] for c in commits),
                             statistics.median(c[1] for c in commits))
    found["lag"] = median_time(lag_command(zk_connect, commits[-1][2]))
    found["lag_command"] = median_time(lag_process(zk_connect, commits[-1][2]))
    return found


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def run(recorder: Recorder) -> None:
    run_shape(recorder, "scale_rtt", {_topic(n): n // BROKERS for n in SIZES},
              {n: _options(n) for n in SIZES})


def run_shape(recorder: Recorder, prefix: str, topics: Mapping[str, int],
              reads: Mapping[int, dict[str, str]]) -> None:
    """Every step per round-trip time in ``RTTS_MS`` and per N in ``reads`` (the read's
    options at N broker-partitions), on a cluster of ``topics[t]`` partitions of every topic
    ``t`` per broker; rows named ``<prefix>.<step>.<N>.rtt<ms>``."""
    table: dict[tuple[int, float], dict[str, tuple[float, float]]] = {}
    for rtt_ms in RTTS_MS:
        hold = hold_for(rtt_ms / 1000) if rtt_ms else None
        measured = ping_pong_rtt(hold)
        before = _load()
        with scale_cluster(BROKERS, topics, hold) as zk:
            for n, options in reads.items():
                table[(n, rtt_ms)] = measure(zk, options, f"{prefix}-{n}")
                print(f"   N={n} rtt={rtt_ms:g} ms: " + ", ".join(
                    f"{k} {wall * 1000:.0f} ms (driver CPU {cpu * 1000:.0f} ms)"
                    for k, (wall, cpu) in table[(n, rtt_ms)].items()), flush=True)
        note = (f"{BROKERS} brokers; ping-pong RTT {measured * 1e6:.0f} us; "
                f"load average {before} before, {_load()} after")
        print(f"   rtt {rtt_ms:g} ms: {note}", flush=True)
        recorder.record(f"{prefix}.rtt{rtt_ms:g}.measured", measured * 1e6, "us", note=note)
        for n in reads:
            for step in STEPS:
                wall, cpu = table[(n, rtt_ms)][step]
                name = f"{prefix}.{step}.{n}.rtt{rtt_ms:g}"
                recorder.record(name, wall * 1000, "ms", note=note)
                recorder.record(f"{name}.driver_cpu", cpu * 1000, "ms", note=note)
    print(markdown(table), flush=True)


def markdown(table: dict[tuple[int, float], dict[str, tuple[float, float]]]) -> str:
    """The issue's table: a row per N, ``0 / 0.5 ms`` figures per step."""
    rtts = sorted({rtt for _, rtt in table})
    head = f"| N (RTT {' / '.join(f'{r:g}' for r in rtts)} ms) | " + " | ".join(STEPS) + " |"
    lines = [head, "|" + " --- |" * (len(STEPS) + 1)]
    for n in sorted({n for n, _ in table}):
        cells = [" / ".join(f"{table[(n, r)][s][0] * 1000:,.0f}" for r in rtts) + " ms"
                 for s in STEPS]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
