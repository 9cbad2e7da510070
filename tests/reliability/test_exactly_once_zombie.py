"""Two attempts of one write task at once, outside Spark: a zombie and its retry (issue 24).

The first attempt (a subprocess, a ``TaskWriter`` with the task's identity) pauses at a point
of the protocol and is then frozen with SIGSTOP: an executor lost to a long GC pause or a
network partition, still alive. Its ZooKeeper session expires (``zk.sessiontimeout.ms``), so
its lock goes; a second attempt (this process) takes over and writes the task. Then the zombie
is thawed (SIGCONT) and runs on. Every value must be in the topic exactly once, read with the
independent reader (log_reader.py), and the zombie must not report success for sets it did
not write. (Two live attempts, the second waiting for the first's lock:
tests/spark/write/test_eo_task.py.)

At after-intent the thawed zombie's fence (a round trip: the lock node must still hold its
token) stops it. Known limit, marked below: the fence runs once per window, before its sets are
handed to the producer, whose requests go out later; frozen at mid-send, the zombie sends the
rest of its window after thawing (duplicates every run; docs/writing.md "Fencing and its
limit").
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from eo_support import HERE, REPO, read_target
from rel_support import Recorder

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = [pytest.mark.zk]

N = 600
SESSION_MS = 1500  # the zombie's session: expired ~SESSION_MS after the freeze
WAIT = 120.0

ATTEMPT = textwrap.dedent(
    """
    import json, os, sys, time
    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StructField, StructType
    from kafka_pyspark._write import TaskWriter, delivery
    from kafka_pyspark._spark.write import build_plan
    from kafka_pyspark._write.identity import TaskIdentity

    args = json.loads(sys.argv[1])
    marks, point = args["marks"], args["pause_at"]
    real = delivery.fault_point

    def pausing(name):
        # the zombie stops here until the test has frozen, then thawed, it (no kill: the
        # environment names the point only because mid-send is reached only when armed)
        if name != point:
            return real(name)
        open(os.path.join(marks, "paused"), "w").close()
        while not os.path.exists(os.path.join(marks, "go")):
            time.sleep(0.01)

    delivery.fault_point = pausing
    vals = [v.encode() for v in args["values"]]
    plan = build_plan(args["options"], StructType([StructField("value", BinaryType(), True)]))
    batches = [pa.RecordBatch.from_arrays([pa.array(vals[i:i + 50], pa.binary())], ["value"])
               for i in range(0, len(vals), 50)]
    msg = TaskWriter(plan, identity=TaskIdentity(*args["identity"])).write(batches)
    print("RESULT " + json.dumps({"messages": msg.messages,
                                  "failure": None if msg.failure is None else repr(msg.failure)}))
    """
)


def values(n: int = N) -> list[bytes]:
    return [f"z-{i:06d}-".encode().ljust(24, b"x") for i in range(n)]


def options(zk: str, topic: str, **more: str) -> dict[str, str]:
    return {"zk.connect": zk, "topic": topic, "batch.size": "10",
            "delivery.guarantee": "exactly-once", "zk.sessiontimeout.ms": str(SESSION_MS),
            "delivery.visibility.wait.ms": "1000", **more}


def start_attempt(tmp: Path, opts: dict[str, str], pause_at: str, ident: list[Any]
                  ) -> subprocess.Popen[str]:
    marks = tmp / "marks"
    marks.mkdir(exist_ok=True)
    args = {"marks": str(marks), "pause_at": pause_at, "options": opts, "identity": ident,
            "values": [v.decode() for v in values()]}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")) if p),
        "KAFKA_PYSPARK_FAULT": pause_at, "KAFKA_PYSPARK_FAULT_DIR": str(marks)}
    return subprocess.Popen([sys.executable, "-c", ATTEMPT, json.dumps(args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the first attempt ended early ({proc.returncode}):\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {path.name}")
        time.sleep(0.02)


def second_attempt(opts: dict[str, str], ident: list[Any]) -> Any:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafka_pyspark._spark.write import build_plan
    from kafka_pyspark._write import TaskWriter
    from kafka_pyspark._write.identity import TaskIdentity

    plan = build_plan(opts, StructType([StructField("value", BinaryType(), True)]))
    vals = values()
    batches = [pa.RecordBatch.from_arrays([pa.array(vals[i:i + 50], pa.binary())], ["value"])
               for i in range(0, len(vals), 50)]
    return TaskWriter(plan, identity=TaskIdentity(*ident)).write(batches)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.communicate()
    return proc.returncode, out, err


@pytest.mark.parametrize("point", [
    "after-intent",
    "mid-send",
])
def test_zombie_thawed_after_its_retry_wrote_the_task(
    point: str, brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path,
    record: Recorder,
) -> None:
    topic = f"zombie-{point}"
    ident = ["zombie-sink", 3, 1]
    opts = options(zk_connect, topic)
    zombie = start_attempt(tmp_path, opts, point, ident)
    try:
        wait_for(tmp_path / "marks" / "paused", zombie)
        zombie.send_signal(signal.SIGSTOP)
        time.sleep(SESSION_MS / 1000 * 3)  # its session expires, and its lock with it
        msg = second_attempt({**opts, "delivery.lock.timeout.ms": "30000"}, ident)
        (tmp_path / "marks" / "go").touch()
    finally:
        zombie.send_signal(signal.SIGCONT)
    rc, out, err = finish(zombie)
    got = read_target(brokers, topic)
    record(f"zombie attempt frozen at {point}, thawed after its retry",
           expected=values(), got=list(got.elements()),
           detail=f"zombie exit {rc}: {(err.strip().splitlines() or ['-'])[-1][:120]}")
    assert msg.failure is None and msg.messages == N
    assert got == Counter(values()), f"zombie exit {rc}\n{out}\n{err[-3000:]}"
    result = next((json.loads(line[7:]) for line in out.splitlines()
                   if line.startswith("RESULT ")), None)
    # the zombie may end with an error (it lost its lock) or find the retry's done record; it
    # never reports as its own write what it did not confirm
    assert result is None or result["failure"] is not None or result["messages"] == N
