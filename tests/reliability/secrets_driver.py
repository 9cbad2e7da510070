"""A Spark application that uses ZooKeeper credentials everywhere (run as a subprocess).

``python secrets_driver.py CONFIG.json``: a local Spark session of its own with the UI on (on a
port of Spark's choosing) and the event log on, which reads, streams and writes through
ZooKeeper digest ACLs with ``zk.auth.user`` + ``zk.auth.password``, provokes every credentials
error it can, and writes what Spark showed of it to ``<out>/texts.json``: plan strings
(``explain``, ``queryExecution``), temp views, streaming progress, error texts and the UI's
REST answers, with the row counts and the values (as text) the batch read and the stream
got. Its event log (``<out>/events``) and checkpoint (``<out>/cp``) stay on disk.

The config holds ``zk`` (connect string), ``topic`` (2 partitions, readable only with the
credentials), ``group``, ``user``, ``password``, ``out``; ``legacy: true`` passes the former
option ``zk.auth`` instead and ``redaction_regex`` sets ``spark.redaction.regex``: both show
what Spark shows of an option it does not redact (how the checks were seen to catch a leak).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def main(config_path: str) -> None:
    cfg: dict[str, Any] = json.loads(Path(config_path).read_text())
    out = Path(cfg["out"])
    spark = _session(out, cfg.get("redaction_regex"))
    texts: dict[str, str] = {}
    counts: dict[str, int] = {}
    got: dict[str, list[str]] = {}
    try:
        got["batch"] = _batch(spark, cfg, texts, counts)
        _views(spark, cfg, texts, counts)
        got["stream"] = _stream(spark, cfg, out, texts, counts)
        _write(spark, cfg, texts, counts)
        _errors(spark, cfg, texts)
        _rest(spark, texts)
    finally:
        (out / "texts.json").write_text(
            json.dumps({"texts": texts, "counts": counts, "values": got}))
        spark.stop()


def _session(out: Path, redaction_regex: str | None) -> SparkSession:
    from kafka_pyspark import register

    (out / "events").mkdir(exist_ok=True)
    # Python data sources run the interpreter in PYSPARK_PYTHON (spark.pyspark.python is not enough)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if redaction_regex is not None:
        builder = builder.config("spark.redaction.regex", redaction_regex)
    spark = (
        builder.master("local[2]").appName("kafka07-secrets")
        .config("spark.ui.enabled", "true").config("spark.ui.port", "0")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", (out / "events").as_uri())
        .config("spark.eventLog.compress", "false")  # the same events, greppable
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    register(spark)
    return spark


def _options(cfg: dict[str, Any], password: str | None = None) -> dict[str, str]:
    """The cluster options with credentials (``password`` instead of the right one)."""
    secret = cfg["password"] if password is None else password
    if cfg.get("legacy"):
        return {"zk.connect": cfg["zk"], "zk.auth": f"digest:{cfg['user']}:{secret}"}
    return {"zk.connect": cfg["zk"], "zk.auth.user": cfg["user"], "zk.auth.password": secret}


def _plans(df: DataFrame, name: str, texts: dict[str, str]) -> None:
    """Everything a DataFrame's plan shows: each explain mode and each queryExecution string."""
    jvm = df.sparkSession._jvm
    assert jvm is not None
    qe = df._jdf.queryExecution()
    for mode in ("simple", "extended", "codegen", "cost", "formatted"):
        texts[f"{name}: explain {mode}"] = jvm.PythonSQLUtils.explainString(qe, mode)
    texts[f"{name}: queryExecution"] = qe.toString()
    for part in ("logical", "analyzed", "optimizedPlan", "sparkPlan", "executedPlan"):
        plan = getattr(qe, part)()
        texts[f"{name}: {part}"] = plan.toString()
        texts[f"{name}: {part} json"] = plan.toJSON()


def _values(df: DataFrame) -> list[str]:
    return sorted(r.v for r in df.selectExpr("CAST(value AS STRING) AS v").collect())


def _batch(spark: SparkSession, cfg: dict[str, Any], texts: dict[str, str],
           counts: dict[str, int]) -> list[str]:
    df = spark.read.format("kafka07").options(**_options(cfg), subscribe=cfg["topic"]).load()
    counts["batch"] = df.count()
    _plans(df, "batch", texts)
    return _values(df)


def _views(spark: SparkSession, cfg: dict[str, Any], texts: dict[str, str],
           counts: dict[str, int]) -> None:
    df = spark.read.format("kafka07").options(**_options(cfg), subscribe=cfg["topic"]).load()
    df.createOrReplaceTempView("secrets_df_view")
    quoted = ", ".join(f"'{k}' '{v}'" for k, v in {**_options(cfg), "subscribe": cfg["topic"]}
                       .items())
    spark.sql(f"CREATE OR REPLACE TEMP VIEW secrets_sql_view USING kafka07 OPTIONS ({quoted})")
    for view in ("secrets_df_view", "secrets_sql_view"):
        counts[view] = spark.sql(f"SELECT value FROM {view}").count()
        _plans(spark.sql(f"SELECT * FROM {view}"), view, texts)
        described = spark.sql(f"DESCRIBE TABLE EXTENDED {view}").collect()
        texts[f"{view}: describe"] = "\n".join(str(r) for r in described)
        texts[f"{view}: catalog"] = str(spark.catalog.getTable(view))
    texts["show views"] = str(spark.sql("SHOW VIEWS").collect())
    texts["list tables"] = str(spark.catalog.listTables())


def _stream(spark: SparkSession, cfg: dict[str, Any], out: Path, texts: dict[str, str],
            counts: dict[str, int]) -> list[str]:
    q = (spark.readStream.format("kafka07").options(**_options(cfg), subscribe=cfg["topic"])
         .option("startingOffsets", "earliest").option("commitToGroup", "true")
         .option("group.id", cfg["group"]).load()
         .writeStream.format("parquet").option("checkpointLocation", str(out / "cp"))
         .option("path", str(out / "sink")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    texts["stream: exception"] = str(q.exception())
    texts["stream: progress"] = "\n".join(p.json for p in q.recentProgress)
    texts["stream: status"] = json.dumps(q.status)
    texts["stream: explain"] = q._jsq.explainInternal(True)
    counts["stream"] = spark.read.parquet(str(out / "sink")).count()
    return _values(spark.read.parquet(str(out / "sink")))


def _write(spark: SparkSession, cfg: dict[str, Any], texts: dict[str, str],
           counts: dict[str, int]) -> None:
    rows = spark.createDataFrame([(f"w{i}".encode(),) for i in range(5)], "value binary")
    writer = rows.write.format("kafka07").options(**_options(cfg), topic=cfg["topic"])
    writer.mode("append").save()
    again = spark.read.format("kafka07").options(**_options(cfg), subscribe=cfg["topic"]).load()
    counts["after write"] = again.count()
    texts["write: last plan"] = again._jdf.queryExecution().toString()


def _errors(spark: SparkSession, cfg: dict[str, Any], texts: dict[str, str]) -> None:
    """Every credentials error a user can meet, as Spark hands it over (Java stack included)."""
    wrong = _options(cfg, f"wrong-{cfg['password']}")
    topic = cfg["topic"]
    no_user = {"zk.connect": cfg["zk"], "zk.auth.password": cfg["password"]}
    legacy = {"zk.connect": cfg["zk"], "zk.auth": f"digest:{cfg['user']}:{cfg['password']}"}
    at = {"zk.connect": f"{cfg['user']}:{cfg['password']}@{cfg['zk']}"}
    cases: dict[str, Callable[[], object]] = {
        "read, no credentials": lambda: spark.read.format("kafka07")
        .option("zk.connect", cfg["zk"]).option("subscribe", topic).load().collect(),
        "read, wrong password": lambda: spark.read.format("kafka07")
        .options(**wrong, subscribe=topic).load().collect(),
        "read, password without user": lambda: spark.read.format("kafka07")
        .options(**no_user, subscribe=topic).load().collect(),
        "read, zk.auth": lambda: spark.read.format("kafka07")
        .options(**legacy, subscribe=topic).load().collect(),
        "read, user info in zk.connect": lambda: spark.read.format("kafka07")
        .options(**at, subscribe=topic).load().collect(),
        "write, wrong password": lambda: spark.createDataFrame([(b"x",)], "value binary")
        .write.format("kafka07").options(**wrong, topic=topic).mode("append").save(),
        "stream, wrong password": lambda: _failed_stream(spark, wrong, topic),
    }
    for name, action in cases.items():
        try:
            action()
            texts[f"error: {name}"] = "NO ERROR"
        except Exception as e:  # every error's text is what is checked
            texts[f"error: {name}"] = _error_text(e)


def _failed_stream(spark: SparkSession, options: dict[str, str], topic: str) -> None:
    q = (spark.readStream.format("kafka07").options(**options, subscribe=topic).load()
         .writeStream.format("noop").trigger(availableNow=True).start())
    q.awaitTermination(300)
    error = q.exception()
    if error is not None:
        raise error


def _error_text(e: BaseException) -> str:
    """The error's text, its attributes (the JVM exception and its stack trace included) and
    those of its causes."""
    parts: list[str] = []
    seen: BaseException | None = e
    while seen is not None:
        parts += [repr(seen), str(seen), str(vars(seen))]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def _rest(spark: SparkSession, texts: dict[str, str]) -> None:
    """The UI's REST answers, once Spark's listeners have seen every event."""
    sc = spark.sparkContext
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    for what in ("sql?details=true&planDescription=true", "jobs", "stages?details=true",
                 "environment", "streaming/statistics"):
        try:
            with urllib.request.urlopen(f"{base}/{what}", timeout=30) as answer:
                texts[f"rest: {what}"] = answer.read().decode()
        except OSError as e:
            texts[f"rest: {what}"] = f"unavailable: {e}"


if __name__ == "__main__":
    main(sys.argv[1])
