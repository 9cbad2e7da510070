"""Spark writes per executor core, with the broker on another core: ``write.core.*``.

:mod:`bench.write` measures ``df.write.format("kafka07")`` on ``local[2]`` with the sink broker
on the same 2 cores, where the sink's process and the receiving end of the loopback take CPU
from the writer that the null writer never pays. On a cluster the broker runs on other
machines. Here a child process pinned to one CPU runs Spark ``local[1]`` (driver, JVM, Python
workers: everything of Spark's), and the sink broker is pinned to another; the configurations
of :func:`bench.write.spark_configs` save the same rows in interleaved rounds, as in
:mod:`bench.write`, and the executor's CPU is that one CPU's busy time (``/proc/stat``).

Rows:

* ``write.core.<codec>.vs_null`` (none, snappy): the best-of rate against the null writer's,
  target >= 80%; ``...vs_null.paired`` the median per round; ``...cost_vs_null.paired`` the
  null writer's busy CPU per row on the executor's CPU over this codec's, both without the JIT
  compiler's (as in :mod:`bench.write`); ``write.core.<codec>.vs_trip.paired`` against the
  writer that only encodes and sends.
* ``write.core.gzip.deflate_bound``: gzip's rate against the most deflate allows one core,
  ``1 / (the null writer's CPU per row + libdeflate's per row at the default level)``, target
  >= 85%; libdeflate's rate is measured on the executor's CPU between the rounds.
* ``write.core.<name>.cpu_per_row`` and ``.broker_cpu_per_row``: the executor CPU's busy time
  per row (best round) and the sink's.

The sender's kernel still does the loopback's receiving TCP work on the executor's CPU, which a
cluster's network takes off it: an executor there sees at least these ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench.results import Recorder, best_time
from bench.sink import Sink, trip_source
from bench.spark_sources import ROOT, spark_session
from bench.write import (
    BARE_ROWS,
    SPARK_ROUNDS,
    SparkRun,
    _arrow_batches,
    _null_source,
    deflate_bound,
    interleaved_rounds,
    libdeflate_pass,
    paired,
    spark_configs,
)


def _child(out: Path, executor_cpu: int, broker_cpu: int) -> None:
    """Pinned to ``executor_cpu`` before Spark starts (its JVM and workers inherit it), the
    sink moved to ``broker_cpu``; every round's runs and libdeflate's rates into ``out``."""
    os.sched_setaffinity(0, {executor_cpu})
    deflate = libdeflate_pass(_arrow_batches(BARE_ROWS))
    deflate_rates = [BARE_ROWS / best_time(deflate, repeat=3)]
    with Sink() as sink:
        sink_pid = sink.process.pid
        assert sink_pid is not None  # started
        os.sched_setaffinity(sink_pid, {broker_cpu})  # its serving threads start there later
        spark = spark_session("bench-write-core", _null_source(), trip_source(),
                              master="local[1]")
        try:
            rounds = interleaved_rounds(spark, spark_configs(sink), sink_pid, deflate,
                                        deflate_rates, on_cpu=executor_cpu)
        finally:
            spark.stop()
    out.write_text(json.dumps({
        "rounds": {name: [asdict(r) for r in runs] for name, runs in rounds.items()},
        "deflate_rates": deflate_rates,
    }))


def _measure(executor_cpu: int, broker_cpu: int) -> tuple[dict[str, list[SparkRun]], list[float]]:
    """:func:`_child` in a fresh interpreter (a JVM already running here would not be pinned)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rounds.json"
        subprocess.run([sys.executable, "-m", "bench.write_core", str(out), str(executor_cpu),
                        str(broker_cpu)], cwd=ROOT, check=True)
        data = json.loads(out.read_text())
    rounds = {name: [SparkRun(**r) for r in runs] for name, runs in data["rounds"].items()}
    return rounds, [float(r) for r in data["deflate_rates"]]


def run(recorder: Recorder) -> None:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2:
        print("   skipped: needs 2 CPUs it can pin to (Linux), one for Spark, one for the broker")
        return
    rounds, deflate_rates = _measure(cpus[0], cpus[1])
    best = {name: max(runs, key=lambda r: r.rate) for name, runs in rounds.items()}
    null = rounds["null"]
    recorder.record("write.core.null", best["null"].rate, "rows/s",
                    note="the null writer on one pinned core (local[1])")
    for name, r in best.items():
        recorder.record(f"write.core.{name}.cpu_per_row", r.cpu_ns, "ns",
                        note="the executor CPU's busy time per row, best round")
        if name != "null":
            recorder.record(f"write.core.{name}.broker_cpu_per_row", r.sink_ns, "ns",
                            note="the sink broker's, on its own CPU")
    for codec in ("none", "snappy"):
        runs, trip = rounds[codec], rounds[f"trip_{codec}"]
        recorder.record(
            f"write.core.{codec}.vs_null", best[codec].rate, "rows/s", limit=best["null"].rate,
            target=">= 80% of the null writer: one executor core, the broker on another",
        )
        recorder.record(
            f"write.core.{codec}.vs_null.paired",
            paired(runs, null, lambda r, n: r.rate / n.rate), "%",
            note=f"median over {SPARK_ROUNDS} rounds of the rate / the null writer's",
        )
        recorder.record(
            f"write.core.{codec}.cost_vs_null.paired",
            paired(runs, null, lambda r, n: n.cost_ns / r.cost_ns), "%",
            note="median over the rounds of the null writer's CPU per row / this codec's, "
            "the executor's CPU, without the JIT compiler's",
        )
        recorder.record(
            f"write.core.{codec}.vs_trip.paired",
            paired(runs, trip, lambda r, t: r.rate / t.rate), "%",
            note="kafka07's rate / the writer's that only encodes and sends, per round",
        )
    fastest = max(deflate_rates)
    recorder.record(
        "write.core.gzip.deflate_bound", best["gzip"].rate, "rows/s",
        limit=deflate_bound(best["null"], fastest, cores=1),
        target=">= 85% of 1 / (the null writer's CPU per row + libdeflate's), one core",
    )
    recorder.record(
        "write.core.gzip.deflate_bound.paired",
        statistics.median(100 * r.rate / deflate_bound(n, d, cores=1) for r, n, d in
                          zip(rounds["gzip"], null, deflate_rates[1:], strict=True)),
        "%", note="median over the rounds, the bound from the same round's null writer and "
        "libdeflate pass",
    )


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) == 4:
        _child(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
    else:
        from bench.__main__ import main

        sys.exit(main(["write_core"]))
