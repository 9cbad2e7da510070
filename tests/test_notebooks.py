"""Every notebook in notebooks/ runs top to bottom against the embedded broker, so they never rot.

The Databricks source files are split at ``# COMMAND ----------`` and the cells run in order in
this process, in one namespace (as a notebook kernel would), reusing the test session's Spark.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


pytestmark = [pytest.mark.spark, pytest.mark.zk]

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
HEADER = "# Databricks notebook source\n"
SEPARATOR = "\n# COMMAND ----------\n"
NAMES = ["01_batch_ingest.py", "02_streaming_pipeline.py", "03_write_and_read_back.py"]


def cells(path: Path) -> list[str]:
    text = path.read_text()
    assert text.startswith(HEADER), f"{path.name} is not a Databricks source notebook"
    return text[len(HEADER):].split(SEPARATOR)


def run(
    name: str, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, figures: Path
) -> dict[str, Any]:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("KAFKA07_FIGURES_DIR", str(figures))
    path = NOTEBOOKS / name
    ns: dict[str, Any] = {"__name__": "__main__"}
    try:
        for i, cell in enumerate(cells(path)):
            exec(compile(cell, f"{path.name} cell {i}", "exec"), ns)
    except BaseException:
        if ns.get("nb") is not None:
            ns["nb"].close()
        raise
    nb = ns["nb"]
    # the last cell cleaned up: brokers, ZooKeeper, the directory, the local schema
    assert nb.cluster.brokers == [] and not nb.cluster.tmp.exists()
    assert not spark.catalog.databaseExists(nb.schema)
    assert ns["spark"] is spark  # the test session's Spark was reused, not stopped
    return ns


def test_every_notebook_is_a_databricks_source_file() -> None:
    names = sorted(p.name for p in NOTEBOOKS.iterdir() if not p.name.startswith("."))
    assert names == NAMES
    for name in names:
        parts = cells(NOTEBOOKS / name)
        assert len(parts) > 5
        assert all(line.startswith("# MAGIC") for line in parts[0].strip().splitlines())
        # the install cell: the same in each, driven by the widget `install` (auto: nothing
        # when the package is installed, as here), never a package index the name is not on
        assert parts[1] == cells(NOTEBOOKS / NAMES[0])[1]
        assert 'dbutils.widgets.text("install", "auto"' in parts[1]
        assert "%pip install kafka_pyspark" not in "".join(parts)


def kafka_pyspark_imports(path: Path) -> set[str]:
    """The kafka_pyspark modules a notebook imports (``from M import ...`` and ``import M``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.split(".")[0] == "kafka_pyspark"}


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_use_only_the_public_api_and_databricks_idioms(name: str) -> None:
    text = (NOTEBOOKS / name).read_text()
    # the package's top level, and the local stand-ins for Databricks' globals
    assert kafka_pyspark_imports(NOTEBOOKS / name) <= {
        "kafka_pyspark", "kafka_pyspark.testing.notebook"}
    assert ".show(" not in text and "/dbfs" not in text and "display(" in text
    # every setting is a widget; a user's topic is written to only when a widget says so
    assert 'dbutils.widgets.get("zk_connect")' in text
    assert 'dbutils.widgets.dropdown("write_test_messages", "no", ["no", "yes"]' in text
    if name != "03_write_and_read_back.py":  # a table: catalog.schema.table (Unity Catalog)
        assert 'f"{CATALOG}.{SCHEMA}.' in text


def test_batch_ingest(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ns = run("01_batch_ingest.py", spark, monkeypatch, tmp_path)
    assert ns["ingested"] == 3000
    assert sum(ns["partition_counts"].values()) == 3000
    assert set(ns["partition_counts"]) == {(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)}
    assert ns["TABLE"] == "spark_catalog.kafka07_01_batch_ingest.kafka07_events"
    assert int(ns["volume"]["count"].sum()) == 3000
    # the plot, saved to a file when not on Databricks: a PNG
    assert ns["nb"].figures == [tmp_path / "01_batch_ingest-1.png"]
    assert (tmp_path / "01_batch_ingest-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_streaming_pipeline(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ns = run("02_streaming_pipeline.py", spark, monkeypatch, tmp_path)
    assert ns["TABLE"] == "spark_catalog.kafka07_02_streaming_pipeline.kafka07_orders"
    # the checkpoint is in the Volume stand-in, inside the local run's directory
    assert ns["CHECKPOINT"] == (
        f"{ns['VOLUMES']}/spark_catalog/kafka07_02_streaming_pipeline/checkpoints/kafka07/"
        "orders-to-table")
    assert {r["status"] for r in ns["lag_before"]} == {"not-committed"}
    assert ns["batches"] > 1  # maxBytesPerTrigger cut the backlog into several micro-batches
    assert [(r["status"], r["lag"]) for r in ns["lag_after"]] == [("ok", 0)] * 5
    assert sum(r["lag"] for r in ns["lag_grown"]) > 0
    assert [(r["status"], r["lag"]) for r in ns["lag_final"]] == [("ok", 0)] * 5
    assert ns["rows_in_table"] == 1200


def test_write_and_read_back(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ns = run("03_write_and_read_back.py", spark, monkeypatch, tmp_path)
    assert ns["rows_back"] == 2000
    assert ns["ids_back"] == list(range(2000))
    assert len(ns["places"]) == 50 and ns["keys_where_expected"] == 50


