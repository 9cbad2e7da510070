"""Spark Connect keeps working: write, read and an ``availableNow`` stream through
``SparkSession.builder.remote("local[2]")``, in a subprocess (its own JVM and Connect server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = [pytest.mark.spark, pytest.mark.zk, pytest.mark.own_spark]


def test_read_write_stream_and_credentials_through_spark_connect(
    broker: EmbeddedBroker, zk_connect: str, tmp_path: Path
) -> None:
    """One Connect server (a JVM start is the most of this test's time): the smoke steps, then
    credentials. Spark Connect puts each client plan, as text, in the event log (and its UI's
    Connect tab): ``register(spark)`` makes Spark redact the password there, in a plan's
    options and in a SQL statement's text, single- or double-quoted, over several lines."""
    pytest.importorskip("grpc", reason="pip install 'pyspark[connect]' (the test extra has it)")
    script = Path(__file__).with_name("connect_smoke.py")
    password = "Pw-connect-not-in-the-event-log"
    events = tmp_path / "events"
    events.mkdir()
    # SPARK_TESTING: the local Connect server binds an ephemeral port and the client asks it
    # which (PySpark's own tests do this, SPARK-42272); the default 15002 may be taken by
    # another Spark Connect server on the machine.
    done = subprocess.run(
        [sys.executable, str(script), zk_connect, str(tmp_path / "checkpoint"), str(events),
         password],
        capture_output=True, text=True, timeout=400, env={**os.environ, "SPARK_TESTING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["connect"].startswith("pyspark.sql.connect")
    assert result["values"] == sorted(f"m{i}" for i in range(100))
    assert result["streamed"] == 100
    assert result["copied"] == sorted(f"m{i}" for i in range(100))
    assert result["credentials"] == {"read": 5, "viewed": 10}
    logged = b"".join(p.read_bytes() for p in sorted(events.rglob("*")) if p.is_file()).decode()
    assert "SparkListenerConnectOperationStarted" in logged  # plans as text are there
    assert 'key: \\"zk.auth.user\\"\\n' in logged  # the read's options among them
    assert "CREATE TEMP VIEW w USING kafka07" in logged  # the double-quoted statement too
    assert "*********(redacted)" in logged
    assert password not in logged
    assert password not in done.stdout + done.stderr
