"""Every notebook in notebooks/ runs top to bottom against the embedded broker, so they never rot.

The Databricks source files are split at ``# COMMAND ----------`` and the cells run in order in
this process, in one namespace (as a notebook kernel would), reusing the test session's Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


pytestmark = [pytest.mark.spark, pytest.mark.zk]

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
HEADER = "# Databricks notebook source\n"
SEPARATOR = "\n# COMMAND ----------\n"


def cells(path: Path) -> list[str]:
    text = path.read_text()
    assert text.startswith(HEADER), f"{path.name} is not a Databricks source notebook"
    return text[len(HEADER):].split(SEPARATOR)


def run(name: str, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path = NOTEBOOKS / name
    ns: dict[str, Any] = {"__name__": "__main__"}
    try:
        for i, cell in enumerate(cells(path)):
            exec(compile(cell, f"{path.name} cell {i}", "exec"), ns)
    except BaseException:
        if ns.get("local") is not None:
            ns["local"].close()
        raise
    local = ns["local"]
    assert local.brokers == [] and not local.tmp.exists()  # the last cell cleaned up
    assert ns["spark"] is spark  # the test session's Spark was reused, not stopped
    return ns


def test_every_notebook_is_a_databricks_source_file() -> None:
    names = sorted(p.name for p in NOTEBOOKS.iterdir() if not p.name.startswith("."))
    assert names == [
        "01_batch_ingest.py", "02_streaming_pipeline.py", "03_write_and_read_back.py",
    ]
    for name in names:
        parts = cells(NOTEBOOKS / name)
        assert len(parts) > 5
        assert all(line.startswith("# MAGIC") for line in parts[0].strip().splitlines())


def test_batch_ingest(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run("01_batch_ingest.py", spark, monkeypatch)
    assert ns["ingested"] == 3000
    assert sum(ns["partition_counts"].values()) == 3000
    assert set(ns["partition_counts"]) == {(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)}
    assert ns["FORMAT"] in ("delta", "parquet")
    assert int(ns["volume"]["count"].sum()) == 3000


def test_streaming_pipeline(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run("02_streaming_pipeline.py", spark, monkeypatch)
    assert {r["status"] for r in ns["lag_before"]} == {"not-committed"}
    assert ns["batches"] > 1  # maxBytesPerTrigger cut the backlog into several micro-batches
    assert [(r["status"], r["lag"]) for r in ns["lag_after"]] == [("ok", 0)] * 5
    assert sum(r["lag"] for r in ns["lag_grown"]) > 0
    assert [(r["status"], r["lag"]) for r in ns["lag_final"]] == [("ok", 0)] * 5
    assert ns["rows_in_table"] == 1200


def test_write_and_read_back(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run("03_write_and_read_back.py", spark, monkeypatch)
    assert ns["rows_back"] == 2000
    assert ns["ids_back"] == list(range(2000))
    assert len(ns["places"]) == 50 and ns["keys_where_expected"] == 50


