"""Write throughput: ``df.write.format("kafka07")`` against a bare loop and bare zlib.

Targets (docs/dev/FAST-LANE.md "Performance targets"; batch.size 200, 200-byte values, 2 cores):
none and snappy >= 500,000 messages/s and >= 50% of the same rows encoded and sent by a bare loop
with no Spark; gzip >= 70% of bare zlib compression throughput of the same bytes.

What is measured, all in this run, on this machine:

* ``write.spark.<codec>``: ``spark.range(N)`` -> a 200-byte binary ``value`` column ->
  ``write.format("kafka07")`` with ``broker.list`` (local[2] from ``spark-conf/``), wall time
  of ``save()``; N is :data:`SPARK_ROWS` for every configuration, the null writer's included.
* ``write.bare.<codec>``: the same rows as pre-built Arrow batches, cut into sets of 200,
  encoded with ``encode_message_set_arrow`` and sent with ``client.Producer`` in one Python loop
  (one core, no Spark), delivery barrier included.
* ``write.zlib``: ``zlib`` deflate (level 6, as the gzip wrapper uses) of the same message-set
  bytes, 200 messages per call, one core.
* ``write.spark.null``: the Spark ceiling, a Python data source writer that only counts the
  Arrow rows it is given, same DataFrame, same path through Spark.
* ``write.spark.<name>.cpu_per_row``: the machine's busy CPU time (all cores, ``/proc/stat``)
  during that ``save()`` per row, of the round with the best rate. The null writer's shows what
  Spark itself spends per row; every configuration ran with the cores busy (``.util``).
  ``.sink_cpu_per_row``: the sink broker process's part of it (on a cluster the broker runs on
  other machines; here it takes the writer's cores).
* ``write.send.<codec>.cpu_per_row`` and ``write.spark.<codec>.loopback_bound`` (none,
  snappy): the CPU per row, this process's and the sink's, of handing the same message sets,
  encoded beforehand, to the sink (the Producer's Python per set, the kernel's TCP at both ends
  of the loopback, the sink's splice), and Spark's rate against ``2 / (cpu_per_row(null) +
  that)``: a null writer moves no byte, a writer to a broker on the same 2 cores must. Informative
  (the target is against the null writer); what the bound leaves to the writer is the encode
  pass, routing and batching.
* ``write.spark.trip_<codec>`` (none, snappy): a writer that only encodes and sends (one encoder
  call per Arrow batch, the sets handed to a ``Producer`` for the sink; :mod:`bench.sink`'s
  ``bench_trip``), measured in the same rounds: ``...vs_null.paired`` is what these 2 cores
  leave any writer that moves the bytes, ``write.spark.<codec>.vs_trip.paired`` what kafka07's
  routing, batching, checks and delivery cost on top.
* ``write.spark.gzip.deflate_bound``: Spark's gzip rate against the most deflate allows on
  these 2 cores: ``2 / (cpu_per_row(null) + 1 / libdeflate rate on one core)``, Spark's own
  CPU per row (it does not go away) plus libdeflate's deflate of the same bytes at the encoder's
  default level, nothing else. Twice libdeflate's rate alone would pretend Spark costs nothing.
  libdeflate's rate is measured before the rounds and again after each (the fastest pass is the
  bound's; each round's own pass is its paired bound's).
* ``...vs_null.paired`` and ``...deflate_bound.paired``: the same ratios per round (each
  configuration against the null writer's save of that round), median over the rounds. The
  best-of ratios take each side's best moment, and the machine's speed drifts over minutes; the
  paired median moves less from run to run.
* ``...cost_vs_null.paired`` (none, snappy): per round, the null writer's busy CPU per row over
  this codec's, both without the CPU of the JVM's JIT compiler threads, median over the rounds.
  The compiler keeps compiling Spark's code well after the warm-up, in whichever save it
  happens to run, which moves the rate ratios either way (docs/writing.md, "Performance"); what
  each row costs without it is the steadier figure. ``write.spark.jit_cpu_per_row`` is the
  compiler's median share.
* ``...writer_cost_vs_null.paired`` (none, snappy): the same without the sink broker's CPU too
  (its process, ``/proc``): what the writer's side costs per row, as where the broker runs on
  other machines. The sender's kernel still does the loopback's receiving TCP work, which a
  cluster's network takes off it, so the ratio there is at least this.

The broker is the sink of :mod:`bench.sink`: the figures are the writer's, not a broker's.
:mod:`bench.write_core` measures the same writers per executor core, the sink on another core.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from bench.results import Recorder, best_time
from bench.sink import Sink, trip_source
from bench.spark_sources import settled_arrow_sink, spark_session

VALUE_SIZE = 200
BATCH_SIZE = 200
ARROW_BATCH = 10_000
#: rows of every measured save(), the same for each configuration: a save has a fixed cost (about
#: 150 ms of CPU here: planning, starting tasks, each worker's set-up), which a ratio between
#: saves of different sizes would count in one rate more than in the other
SPARK_ROWS = 2_000_000
SPARK_ROUNDS = 5
#: rounds of small save()s (each configuration) before the measured ones: Spark's driver
#: JIT-compiles its per-job planning code over dozens of jobs, and the rates of the first saves
#: move with it (docs/writing.md, "Performance")
WARM_UP_ROUNDS = 25
WARM_UP_ROWS = 20_000


def warm_up(spark: Any, configs: Iterable[tuple[str, dict[str, str]]]) -> None:
    """JIT, Python workers: small saves of each configuration (:data:`WARM_UP_ROUNDS`), then
    one larger each (the large-job paths)."""
    configs = list(configs)
    for _ in range(WARM_UP_ROUNDS):
        for fmt, opts in configs:
            spark_write_once(spark, WARM_UP_ROWS, fmt, opts)
    for fmt, opts in configs:
        spark_write_once(spark, 200_000, fmt, opts)


BARE_ROWS = 1_000_000
TOPIC = "bench-write"

# --- data ---------------------------------------------------------------------------------


def _value_sql() -> str:
    # 20 digits of the row number, then filler: 200 bytes, compressible about as text is
    return (
        f"CAST(concat(lpad(CAST(id AS STRING), 20, '0'), repeat('payload-', "
        f"{(VALUE_SIZE - 20) // 8}), repeat('x', {(VALUE_SIZE - 20) % 8})) AS BINARY) AS value"
    )


def _arrow_batches(n: int) -> list[pa.RecordBatch]:
    filler = (b"payload-" * ((VALUE_SIZE - 20) // 8)) + b"x" * ((VALUE_SIZE - 20) % 8)
    out = []
    for start in range(0, n, ARROW_BATCH):
        vals = [b"%020d" % i + filler for i in range(start, min(n, start + ARROW_BATCH))]
        out.append(pa.record_batch([pa.array(vals, pa.binary())], names=["value"]))
    return out


# --- the measurements -----------------------------------------------------------------------


def bare_loop(batches: list[pa.RecordBatch], codec: str, port: int) -> float:
    """rows/s of encode + MULTIPRODUCE + barrier in one Python loop (no Spark)."""
    from kafka_pyspark._messages import encode_message_set_arrow
    from kafka_pyspark.client import Producer

    rows: int = sum(b.num_rows for b in batches)

    def once() -> None:
        with Producer({0: ("127.0.0.1", port)}, max_request_size=1 << 20) as prod:
            p = 0
            for batch in batches:
                values = batch.column(0)
                for start in range(0, len(values), BATCH_SIZE):
                    data = encode_message_set_arrow(
                        values.slice(start, BATCH_SIZE), compression=codec
                    )
                    prod.send(0, TOPIC, p, data)
                    p ^= 1
            prod.flush()

    return rows / best_time(once, repeat=3)


def bare_send(batches: list[pa.RecordBatch], codec: str, port: int, sink_pid: int) -> float:
    """CPU seconds per row, this process's and the sink's, of handing the same message sets,
    encoded beforehand, to the sink with a Producer (its Python per set, the kernel's TCP at
    both ends of the loopback, the sink's splice): what the bytes' trip to a broker on this
    machine costs, which a null writer does not pay. Best of 3."""
    from kafka_pyspark._messages import encode_message_set_arrow
    from kafka_pyspark.client import Producer

    sets = [encode_message_set_arrow(b.column(0).slice(s, BATCH_SIZE), compression=codec)
            for b in batches for s in range(0, b.num_rows, BATCH_SIZE)]
    rows: int = sum(b.num_rows for b in batches)
    best = float("inf")
    for _ in range(3):
        cpu, sink = time.process_time(), process_cpu_seconds(sink_pid)
        with Producer({0: ("127.0.0.1", port)}, max_request_size=1 << 20) as prod:
            for i, data in enumerate(sets):
                prod.send(0, TOPIC, i & 1, data)
            prod.flush()
        time.sleep(0.05)  # the sink's last splices
        used = time.process_time() - cpu + process_cpu_seconds(sink_pid) - sink
        best = min(best, used)
    return best / rows


def bare_zlib(batches: list[pa.RecordBatch]) -> float:
    """rows/s of zlib level-6 deflate over the same message-set bytes, 200 messages a call."""
    from kafka_pyspark._messages import encode_message_set_arrow

    sets = [
        encode_message_set_arrow(b.column(0).slice(s, BATCH_SIZE))
        for b in batches
        for s in range(0, b.num_rows, BATCH_SIZE)
    ]
    rows: int = sum(b.num_rows for b in batches)

    def once() -> None:
        for data in sets:
            c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            c.compress(data)
            c.flush()

    return rows / best_time(once, repeat=3)


def libdeflate_pass(batches: list[pa.RecordBatch]) -> Callable[[], Any]:
    """One pass of libdeflate's deflate at the encoder's default gzip level over the same
    message-set bytes, 200 messages a call, one core (the compiled encoder's gzip limit)."""
    import numpy as np

    from kafka_pyspark._messages import encode_message_set_arrow
    from kafka_pyspark._messages.encode import GZIP_DEFAULT_LEVEL

    _encode: Any = importlib.import_module("kafka_pyspark._messages._encode")

    sets = [
        encode_message_set_arrow(b.column(0).slice(s, BATCH_SIZE))
        for b in batches
        for s in range(0, b.num_rows, BATCH_SIZE)
    ]
    inner = b"".join(sets)
    ends = np.zeros(len(sets) + 1, dtype=np.int64)
    ends[1:] = np.cumsum([len(s) for s in sets])
    return lambda: _encode.deflate_sets(inner, ends, GZIP_DEFAULT_LEVEL)


def _null_source() -> Any:
    """``bench_null``: a writer that only counts the Arrow rows it is given."""

    def count(options: Mapping[str, str], batches: Iterator[pa.RecordBatch]) -> None:
        n = 0
        for batch in batches:
            n += batch.num_rows

    return settled_arrow_sink("bench_null", count)


def busy_cpu_seconds(cpu: int | None = None) -> float:
    """CPU seconds the whole machine (or CPU number ``cpu``) has spent busy (not idle, not
    waiting on I/O), from ``/proc/stat``; NaN where there is none."""
    label = "cpu" if cpu is None else f"cpu{cpu}"
    try:
        with open("/proc/stat") as f:
            line = next((ln for ln in f if ln.split(maxsplit=1)[0] == label), "")
        ticks = [int(x) for x in line.split()[1:]]
    except OSError:
        return float("nan")
    if len(ticks) < 5:
        return float("nan")
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _stat_cpu_ticks(stat: str) -> int:
    """User + system clock ticks from a ``/proc/<pid>[/task/<tid>]/stat`` line."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, all threads) process ``pid`` has used; NaN where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            ticks = _stat_cpu_ticks(f.read())
    except OSError:
        return float("nan")
    return ticks / os.sysconf("SC_CLK_TCK")


def jit_cpu_seconds(spark: Any) -> float:
    """CPU seconds the session's JVM has spent compiling (its C1/C2 compiler threads), from
    ``/proc``; NaN where unknown (not Linux, or a JVM this process did not start)."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    pid = getattr(proc, "pid", None)
    if pid is None:
        return float("nan")
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
                if "Compiler" in stat[stat.index("(") + 1:stat.rindex(")")]:
                    total += _stat_cpu_ticks(stat)
    except OSError:
        return float("nan")
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class SparkRun:
    """One ``save()``: rows/s (wall time, job overhead included), the machine's busy CPU
    nanoseconds per row, the busy share of the 2 cores, the sink broker's CPU ns per row, and
    the JVM's JIT compiler's CPU ns per row (part of the busy CPU)."""

    rate: float
    cpu_ns: float
    util: float
    sink_ns: float
    jit_ns: float = float("nan")

    @property
    def cost_ns(self) -> float:
        """Busy CPU per row without the JIT compiler's (which compiles Spark's code in some
        saves and not in others, whichever writer runs them)."""
        return self.cpu_ns - self.jit_ns


def paired(runs: list[SparkRun], nulls: list[SparkRun],
           ratio: Callable[[SparkRun, SparkRun], float]) -> float:
    """``ratio(run, null writer's run)`` per round, median over the rounds, in percent."""
    return 100 * statistics.median(ratio(r, n) for r, n in zip(runs, nulls, strict=True))


def spark_configs(sink: Sink) -> dict[str, tuple[str, dict[str, str]]]:
    """The measured writers by name, as ``(format, options)``: the null writer, kafka07 with
    each codec to ``sink``, and the trip writer (none, snappy)."""
    configs: dict[str, tuple[str, dict[str, str]]] = {"null": ("bench_null", {})}
    for codec in ("none", "snappy", "gzip"):
        configs[codec] = ("kafka07", {"broker.list": sink.broker_list, "topic": TOPIC,
                                      "compression.codec": codec,
                                      "batch.size": str(BATCH_SIZE)})
    for codec in ("none", "snappy"):
        configs[f"trip_{codec}"] = ("bench_trip", {"port": str(sink.port), "topic": TOPIC,
                                                   "codec": codec, "batch.size": str(BATCH_SIZE)})
    return configs


def deflate_bound(null: SparkRun, deflate_rate: float, cores: int = 2) -> float:
    """The most deflate allows ``cores`` cores: Spark's own CPU per row (the null writer's) plus
    libdeflate's, nothing else (module docstring)."""
    return cores / (null.cpu_ns / 1e9 + 1 / deflate_rate)


def spark_write_once(spark: Any, n: int, fmt: str, options: dict[str, str],
                     sink_pid: int | None = None, on_cpu: int | None = None) -> SparkRun:
    """One ``save()`` of ``n`` rows, measured: the busy CPU is the machine's (2 cores), or CPU
    number ``on_cpu``'s alone where Spark is pinned to it."""
    df = spark.range(n, numPartitions=2).selectExpr(_value_sql())
    w = df.write.format(fmt).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    cpu = busy_cpu_seconds(on_cpu)
    sink = process_cpu_seconds(sink_pid) if sink_pid else 0.0
    jit = jit_cpu_seconds(spark)
    start = time.perf_counter()
    w.save()
    wall = time.perf_counter() - start
    busy = busy_cpu_seconds(on_cpu) - cpu
    sink = (process_cpu_seconds(sink_pid) if sink_pid else 0.0) - sink
    jit = jit_cpu_seconds(spark) - jit
    cores = 2 if on_cpu is None else 1
    return SparkRun(n / wall, busy / n * 1e9, busy / wall / cores, sink / n * 1e9, jit / n * 1e9)


def interleaved_rounds(spark: Any, configs: Mapping[str, tuple[str, dict[str, str]]],
                       sink_pid: int, deflate: Callable[[], Any], deflate_rates: list[float],
                       on_cpu: int | None = None) -> dict[str, list[SparkRun]]:
    """The warm-up, then :data:`SPARK_ROUNDS` rounds of one save of each configuration:
    interleaved, since a shared machine's load shifts over minutes, and this keeps it from
    favouring whichever configuration ran in a quiet moment. libdeflate's rate (the gzip
    bound's) is measured again after each round into ``deflate_rates``, as the machine's speed
    drifts."""
    warm_up(spark, configs.values())
    rounds: dict[str, list[SparkRun]] = {name: [] for name in configs}
    for _ in range(SPARK_ROUNDS):
        for name, (fmt, opts) in configs.items():
            rounds[name].append(spark_write_once(spark, SPARK_ROWS, fmt, opts, sink_pid, on_cpu))
        deflate_rates.append(BARE_ROWS / best_time(deflate, repeat=1))
    return rounds


def run(recorder: Recorder) -> None:
    with Sink() as sink:
        batches = _arrow_batches(BARE_ROWS)
        bare = {codec: bare_loop(batches, codec, sink.port) for codec in ("none", "snappy",
                                                                           "gzip")}
        sink_pid = sink.process.pid
        assert sink_pid is not None  # started
        send_cpu = {codec: bare_send(batches, codec, sink.port, sink_pid)
                    for codec in ("none", "snappy")}
        zlib_rate = bare_zlib(batches)
        deflate = libdeflate_pass(batches)
        deflate_rates = [BARE_ROWS / best_time(deflate, repeat=3)]
        for codec, rate in bare.items():
            recorder.record(f"write.bare.{codec}", rate, "rows/s",
                            note="encode + MULTIPRODUCE + barrier, one Python loop, one core")
        recorder.record("write.zlib", zlib_rate, "rows/s",
                        note="zlib level 6 over the same 200-message sets, one core")
        spark = spark_session("bench-write", _null_source(), trip_source())
        configs = spark_configs(sink)
        try:
            rounds = interleaved_rounds(spark, configs, sink_pid, deflate, deflate_rates)
        finally:
            spark.stop()
        best = {name: max(runs, key=lambda r: r.rate) for name, runs in rounds.items()}
        recorder.record("write.spark.null", best["null"].rate, "rows/s",
                        note="Spark ceiling: a writer that only counts Arrow rows")
        for name, run in best.items():
            recorder.record(f"write.spark.{name}.cpu_per_row", run.cpu_ns, "ns",
                            note="the machine's busy CPU per row (all cores), best round")
            recorder.record(f"write.spark.{name}.util", 100 * run.util, "%",
                            note="busy share of the 2 cores during that save()")
            if name != "null":
                recorder.record(f"write.spark.{name}.sink_cpu_per_row", run.sink_ns, "ns",
                                note="of that, the sink broker's (on a cluster: another machine)")
        recorder.record(
            "write.spark.jit_cpu_per_row",
            statistics.median(r.jit_ns for runs in rounds.values() for r in runs), "ns",
            note="the JVM's JIT compiler's CPU per row, median of every save (part of the busy "
            "CPU above; it compiles in some saves and not in others, whichever writer runs)")
        for codec in ("none", "snappy"):
            recorder.record(
                f"write.spark.{codec}", best[codec].rate, "rows/s", limit=bare[codec],
                target=">= 500,000 rows/s on 2 cores and >= 50% of the bare loop",
            )
            recorder.record(
                f"write.spark.{codec}.vs_null", best[codec].rate, "rows/s",
                limit=best["null"].rate,
                target=">= 80% of the Spark ceiling (null writer), same run",
            )
            recorder.record(
                f"write.spark.{codec}.vs_null.paired",
                paired(rounds[codec], rounds["null"], lambda r, n: r.rate / n.rate),
                "%", note=f"median over {SPARK_ROUNDS} rounds of this codec's rate / the null "
                "writer's in the same round (less exposed to the machine's speed drifting)",
            )
            recorder.record(
                f"write.spark.{codec}.cost_vs_null.paired",
                paired(rounds[codec], rounds["null"], lambda r, n: n.cost_ns / r.cost_ns),
                "%", note=f"median over {SPARK_ROUNDS} rounds of the null writer's busy CPU per "
                "row / this codec's, both without the JIT compiler's: with both cores busy, the "
                "rate ratio this costs allow",
            )
            recorder.record(
                f"write.spark.{codec}.writer_cost_vs_null.paired",
                paired(rounds[codec], rounds["null"],
                       lambda r, n: n.cost_ns / (r.cost_ns - r.sink_ns)),
                "%", note=f"median over {SPARK_ROUNDS} rounds, as cost_vs_null without the sink "
                "broker's CPU (on a cluster the broker runs elsewhere; the loopback's receiving "
                "TCP work is still in the sender's kernel)",
            )
            trip = rounds[f"trip_{codec}"]
            recorder.record(
                f"write.spark.trip_{codec}.vs_null.paired",
                paired(trip, rounds["null"], lambda r, n: r.rate / n.rate),
                "%", note="the same for a writer that only encodes and sends (bench.sink's "
                "bench_trip): what these 2 cores leave any writer that moves the bytes",
            )
            recorder.record(
                f"write.spark.trip_{codec}.cost_vs_null.paired",
                paired(trip, rounds["null"], lambda r, n: n.cost_ns / r.cost_ns),
                "%", note="as cost_vs_null, for that writer",
            )
            recorder.record(
                f"write.spark.{codec}.vs_trip.paired",
                paired(rounds[codec], trip, lambda r, t: r.rate / t.rate),
                "%", note="median over the rounds of kafka07's rate / that writer's: what "
                "routing, batching, checks and delivery cost",
            )
            recorder.record(f"write.send.{codec}.cpu_per_row", send_cpu[codec] * 1e9, "ns",
                            note="handing the encoded sets to the sink on loopback: producer, "
                            "kernel at both ends, sink (one process, no Spark)")
            recorder.record(
                f"write.spark.{codec}.loopback_bound", best[codec].rate, "rows/s",
                limit=2 / (best["null"].cpu_ns / 1e9 + send_cpu[codec]),
                note="against 2 cores / (the null writer's CPU per row + the send's above): "
                "what is left is the encode pass, routing and batching",
            )
        recorder.record(
            "write.spark.gzip", best["gzip"].rate, "rows/s", limit=zlib_rate,
            target=">= 70% of bare zlib compression (limit: zlib on one core; Spark uses 2)",
        )
        recorder.record(
            "write.spark.gzip.per_core", best["gzip"].rate / 2, "rows/s", limit=zlib_rate,
            note="Spark's rate per core (local[2]) against zlib on one core",
        )
        fastest = max(deflate_rates)
        recorder.record(
            "write.spark.gzip.deflate_bound", best["gzip"].rate, "rows/s",
            limit=deflate_bound(best["null"], fastest),
            target=">= 85% of the deflate bound: 2 cores / (Spark's CPU per row, null writer, "
            "+ libdeflate's at the default level)",
        )
        recorder.record(
            "write.spark.gzip.deflate_bound.paired",
            statistics.median(100 * r.rate / deflate_bound(n, d) for r, n, d in
                              zip(rounds["gzip"], rounds["null"], deflate_rates[1:], strict=True)),
            "%", note=f"median over {SPARK_ROUNDS} rounds of gzip's rate / the bound from the "
            "null writer's CPU per row and libdeflate's rate in the same round",
        )
        recorder.record(
            "write.libdeflate", fastest, "rows/s",
            note="libdeflate at the encoder's default level over the same 200-message sets, "
            "one core, the fastest of its passes before and between the rounds",
        )


if __name__ == "__main__":  # pragma: no cover
    from bench.__main__ import main

    sys.exit(main(["write"]))
