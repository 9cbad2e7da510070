"""The first row of a session: the first ``kafka07`` read (10 rows) and write (10 rows) in a
fresh Spark session, against a trivial Python data source's first read and write measured the
same way in the same run (DESIGN: within 1 s of it).

Each measurement is its own process, so its own JVM and Python workers: the session is built
(``spark_sources.spark_session``), one Python UDF job warms the Python worker up (what any
notebook has done before its first ``kafka07`` call), then the timed call runs: ``load()``
through ``collect()`` for a read, ``save()`` for a write. The second call is timed too (for the
note: what a session pays once). ZooKeeper and one embedded broker are started here once; the
kinds run interleaved, best of :data:`ROUNDS` each.

Rows: ``first_row.read`` and ``first_row.write``, seconds, the limit being the trivial source's
time plus 1 s. ``python -m bench.first_row --child KIND ZK TOPIC`` is one measurement.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.results import Recorder

ROUNDS = 2
ROWS = 10
SLACK = 1.0  # seconds over the trivial source (DESIGN's target)
KINDS = ("trivial-read", "kafka07-read", "trivial-write", "kafka07-write")
ROOT = Path(__file__).resolve().parent.parent


def _trivial_source() -> Any:
    """A Python data source ``bench_trivial`` reading ``ROWS`` rows and writing to nowhere."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter

    class Reader(DataSourceReader):
        def read(self, partition: Any) -> Any:
            for i in range(ROWS):
                yield (f"row-{i}".encode(),)

    class Writer(DataSourceWriter):
        def write(self, rows: Any) -> Any:
            for _ in rows:
                pass

    class Trivial(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_trivial"

        def schema(self) -> str:
            return "value binary"

        def reader(self, schema: Any) -> Reader:
            return Reader()

        def writer(self, schema: Any, overwrite: bool) -> Writer:
            return Writer()

    return Trivial


def _child(kind: str, zk: str, topic: str) -> dict[str, float]:
    """One fresh session: warm-up UDF job, then the first and second call of ``kind``."""
    from pyspark.sql import functions as F

    from bench.spark_sources import spark_session

    spark = spark_session("bench-first-row", _trivial_source())
    plus_one = F.udf(lambda x: x + 1, "long")
    spark.range(4).select(plus_one("id")).collect()
    rows = spark.range(ROWS).selectExpr("CAST(CONCAT('w-', id) AS BINARY) AS value")
    rows.cache().count()

    def call() -> float:
        start = time.perf_counter()
        if kind == "trivial-read":
            got = spark.read.format("bench_trivial").load().collect()
        elif kind == "kafka07-read":
            got = (spark.read.format("kafka07").option("zk.connect", zk)
                   .option("subscribe", topic).load().collect())
        elif kind == "trivial-write":
            rows.write.format("bench_trivial").mode("append").save()
            got = [None] * ROWS
        else:
            (rows.write.format("kafka07").option("zk.connect", zk)
             .option("topic", f"{topic}-written").mode("append").save())
            got = [None] * ROWS
        seconds = time.perf_counter() - start
        assert len(got) == ROWS, (kind, len(got))
        return seconds

    first = call()
    second = call()
    spark.stop()
    return {"first": first, "second": second}


def _child_env(pycache: str) -> dict[str, str]:
    """The children's environment: Python's bytecode cache on (in ``pycache``), as for an
    installed wheel (pip compiles it), whatever the calling shell says: without it every
    process Spark starts compiles every module it imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _measure(kind: str, zk: str, topic: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.first_row", "--child", kind, zk, topic],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=env,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"bench.first_row {kind} failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(lines[-1])
    return result


def run(recorder: Recorder) -> None:
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark.client import Producer
    from kafka_pyspark.testing._zookeeper import ZooKeeperServer
    from kafka_pyspark.testing.broker import EmbeddedBroker

    topic = "first-row"
    with tempfile.TemporaryDirectory(prefix="bench-first-row-") as tmp, \
            ZooKeeperServer(data_dir=Path(tmp) / "zk") as zk, \
            EmbeddedBroker(0, log_dir=Path(tmp) / "b0", zk_connect=zk.connect_string,
                           num_partitions=1) as broker:
        with Producer({0: (broker.host, broker.port)}, timeout=10.0) as p:
            p.send(0, topic, 0, encode_message_set([b"r-%d" % i for i in range(ROWS)]))
            p.flush()
        broker.wait_for_topic(topic)
        env = _child_env(str(Path(tmp) / "pycache"))
        subprocess.run([sys.executable, "-m", "compileall", "-q", "kafka_pyspark",
                        "pyspark_kafka07", "bench"], cwd=ROOT, env=env, check=True)
        best: dict[str, dict[str, float]] = {}
        for _ in range(ROUNDS):
            for kind in KINDS:
                got = _measure(kind, zk.connect_string, topic, env)
                prev = best.get(kind)
                if prev is None or got["first"] < prev["first"]:
                    best[kind] = got
    for mode in ("read", "write"):
        ours, trivial = best[f"kafka07-{mode}"], best[f"trivial-{mode}"]
        recorder.record(
            f"first_row.{mode}", ours["first"], "s", limit=trivial["first"] + SLACK,
            target=f"<= trivial Python data source's first {mode} + {SLACK:g} s",
            note=(f"fresh session after a warm-up UDF job, {ROWS} rows, best of {ROUNDS}; "
                  f"trivial source {trivial['first']:.2f} s; second call "
                  f"{ours['second']:.2f} s (trivial {trivial['second']:.2f} s)"),
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(*sys.argv[2:5])))
    else:
        from bench.__main__ import main

        sys.exit(main(["first_row"]))
