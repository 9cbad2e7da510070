"""Spark Declarative Pipelines: ``spark-pipelines run`` of ``examples/pipeline`` on a real
ZooKeeper and embedded brokers, twice, with messages produced before each run.

Each run is the real CLI from the venv in a subprocess (its own JVMs and Spark Connect server),
as a user runs it: the streaming table ``kafka07_events`` reads the source topic with
``commitToGroup``, the materialized view counts it per broker-partition, and the append flow
copies every new row into the ``kafka07`` sink's topic. After each run the table holds every
message of the source topic exactly once, the view its counts and log ends, the sink's topic
every value exactly once, and the 0.7 group the log ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from _cluster import count_values, read_log, read_topic

from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._spark.compat import ADMISSION_CONTROL
from kafka_pyspark.client import Producer
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = [pytest.mark.spark, pytest.mark.zk, pytest.mark.own_spark]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "pipeline"
TABLE = "kafka07_events"
VIEW = "kafka07_events_per_partition"
# one run: two JVMs, a Spark Connect server and three flows; minutes on a loaded 2-core machine
RUN_TIMEOUT = 900.0
# (broker id, partition, messages, compression) per round; the brokers fixture has broker 0
# with 2 partitions and broker 1 with 3
ROUNDS: tuple[tuple[tuple[int, int, int, str], ...], ...] = (
    ((0, 0, 4, "none"), (0, 1, 3, "none"), (1, 0, 2, "none"), (1, 1, 1, "none"),
     (1, 2, 5, "gzip")),
    ((0, 1, 2, "none"), (1, 0, 3, "gzip"), (1, 2, 1, "none")),
)
EventRow = tuple[str, int, int, int, int, int, bytes]
BrokerPartition = tuple[int, int]
EVENT_COLUMNS = ("offset", "inner_index", "next_offset", "value")


def produce(brokers: Sequence[EmbeddedBroker], topic: str, round_no: int) -> None:
    """Round ``round_no`` of :data:`ROUNDS`: confirmed, flushed and registered."""
    with Producer({b.broker_id: (b.host, b.port) for b in brokers}, timeout=10.0) as p:
        for broker_id, partition, n, compression in ROUNDS[round_no]:
            values = [f"r{round_no}-{broker_id}-{partition}-{i}".encode() for i in range(n)]
            p.send(broker_id, topic, partition, encode_message_set(values, compression=compression))
        p.flush()
    for b in brokers:
        b.wait_for_topic(topic)


def write_project(root: Path, storage: Path) -> dict[str, str]:
    """``examples/pipeline`` copied to ``root`` with its spec's storage at ``storage`` (the
    cluster comes from the environment, as docs/pipelines.md says); returns the spec's
    configuration."""
    import yaml

    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    spec_path = root / "spark-pipeline.yml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["storage"] = storage.as_uri()
    spec_path.write_text(yaml.safe_dump(spec))
    conf: dict[str, str] = spec["configuration"]
    return conf


def spark_conf_dir(root: Path) -> Path:
    """The repository's Spark settings for ``spark-pipelines``, as docs/pipelines.md says: no
    ``spark.master`` (the CLI passes ``--remote``; SparkSubmit refuses both), and the Hive
    catalog, so that the second run finds the tables the first one created."""
    root.mkdir()
    lines = (REPO / "spark-conf" / "spark-defaults.conf").read_text().splitlines()
    kept = [line for line in lines if not line.startswith("spark.master")]
    kept.append("spark.sql.catalogImplementation hive")
    (root / "spark-defaults.conf").write_text("\n".join(kept) + "\n")
    return root


def run_pipeline(project: Path, work: Path, conf_dir: Path, zk_connect: str) -> None:
    """``spark-pipelines run`` of ``project``'s spec from the work directory ``work``, with the
    cluster in the environment, as docs/pipelines.md says to run it."""
    cli = Path(sys.executable).with_name("spark-pipelines")
    env = {
        **os.environ,
        "KAFKA07_ZK_CONNECT": zk_connect,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_CONF_DIR": str(conf_dir),
        # the local Connect server binds an ephemeral port (not 15002, which another Spark
        # Connect server on the machine may hold); the client asks it which
        "SPARK_TESTING": "1",
    }
    cmd = [str(cli), "run", "--spec", str(project / "spark-pipeline.yml"), "--remote", "local[2]"]
    done = subprocess.run(
        cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=RUN_TIMEOUT,
    )
    # the JVM's stack frames left out: the pipeline's events and Python errors stay readable
    shown = "\n".join(ln for ln in done.stdout.splitlines() if not ln.startswith("\tat "))
    assert done.returncode == 0, shown[-8000:]
    assert "Run is COMPLETED" in done.stdout, shown[-8000:]


def parquet_rows(table_dir: Path, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Every row of a pipeline table's Parquet files (read with pyarrow, not Spark)."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(table_dir), format="parquet").to_table(columns=list(columns))
    return list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def source_messages(brokers: Sequence[EmbeddedBroker], topic: str) -> list[EventRow]:
    """Every message of ``topic``, read back with the low-level client."""
    return sorted(
        (topic, b, p, offset, inner, next_offset, bytes(value))
        for (b, p), rows in read_log(brokers, topic, *EVENT_COLUMNS).items()
        for offset, inner, next_offset, value in rows
    )


def check_outputs(
    work: Path, brokers: Sequence[EmbeddedBroker], conf: dict[str, str]
) -> dict[BrokerPartition, int]:
    """The table, the view and the sink's topic against the source topic; returns the source's
    log ends."""
    source = conf["kafka07.pipeline.source.topic"]
    expected = source_messages(brokers, source)
    warehouse = work / "spark-warehouse"

    table = sorted(
        (t, b, p, o, i, n, bytes(v))
        for t, b, p, o, i, n, v in parquet_rows(
            warehouse / TABLE, ("topic", "broker", "partition", *EVENT_COLUMNS)
        )
    )
    assert table == expected

    per_partition = Counter((b, p) for _, b, p, *_ in expected)
    by_id = {b.broker_id: b for b in brokers}
    ends = {(b, p): by_id[b].log_end(source, p) or 0 for b, p in per_partition}
    view = parquet_rows(warehouse / VIEW, ("topic", "broker", "partition", "messages", "log_end"))
    assert sorted(view) == sorted(
        (source, b, p, n, ends[(b, p)]) for (b, p), n in per_partition.items()
    )

    copied = count_values(read_topic(brokers, conf["kafka07.pipeline.sink.topic"]))
    assert copied == Counter(v for *_, v in expected)

    return ends


def group_offsets(
    kz: Any, conf: dict[str, str], keys: Iterable[BrokerPartition]
) -> dict[BrokerPartition, int | None]:
    """The 0.7 group's committed offsets in ZooKeeper (None: no node)."""
    group = conf["kafka07.pipeline.group.id"]
    source = conf["kafka07.pipeline.source.topic"]
    found: dict[BrokerPartition, int | None] = {}
    for b, p in keys:
        path = f"/consumers/{group}/offsets/{source}/{b}-{p}"
        found[(b, p)] = int(kz.get(path)[0]) if kz.exists(path) else None
    return found


def test_pipeline_runs_incrementally_into_table_view_and_sink(
    tmp_path: Path, brokers: list[EmbeddedBroker], zk_connect: str, kz: Any
) -> None:
    pytest.importorskip("pyspark.pipelines", reason="Declarative Pipelines need Spark 4.1+")
    pytest.importorskip("yaml", reason="pip install 'pyspark[pipelines]' (the test extra has it)")
    project = tmp_path / "pipeline"
    conf = write_project(project, tmp_path / "storage")
    conf_dir = spark_conf_dir(tmp_path / "spark-conf")
    work = tmp_path / "work"
    work.mkdir()
    source = conf["kafka07.pipeline.source.topic"]

    produce(brokers, source, 0)
    run_pipeline(project, work, conf_dir, zk_connect)
    first = check_outputs(work, brokers, conf)
    # the catalog's files are in the work directory, none beside the spec and definitions
    assert (work / "metastore_db").is_dir()
    assert sorted(p.name for p in project.iterdir()) == ["spark-pipeline.yml", "transformations"]
    # Spark 4.2+ asks the source for an availableNow run's end, so the run commits its final
    # position; before, the run's one micro-batch is committed to the group only by the next
    # run (docs/running.md, "On Spark 4.0 and 4.1")
    nothing: dict[BrokerPartition, int | None] = dict.fromkeys(first)
    assert group_offsets(kz, conf, first) == (first if ADMISSION_CONTROL else nothing)

    produce(brokers, source, 1)
    run_pipeline(project, work, conf_dir, zk_connect)
    second = check_outputs(work, brokers, conf)
    assert group_offsets(kz, conf, second) == (second if ADMISSION_CONTROL else first)
