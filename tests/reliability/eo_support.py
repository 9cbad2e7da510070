"""The fault suite's harness (test_exactly_once.py): input topics, the subprocess driver run
until the stream is done (restarted from its checkpoint after a driver kill), another
producer writing beside the sink, and the count of the target topic by the independent reader.

A fault is armed through the environment of the driver (Spark's workers inherit it):
``KAFKA_PYSPARK_FAULT=<point>[:self|parent]`` and ``KAFKA_PYSPARK_FAULT_DIR=<marks>``; the
point fires once (``<marks>/<point>.fired``, created before the kill). For the driver's
points the harness also SIGKILLs the driver's whole process group (its Python and its JVM)
as soon as the marker appears: the driver dies at that point of its commit whichever process
the point ran in. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import log_reader
from rel_support import produce

from kafka_pyspark._shared.defaults import DELIVERY_ZK_ROOT

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "eo_driver.py"
REPO = HERE.parents[1]
RUN_TIMEOUT = 300.0

#: the executor side's points, in protocol order, then the driver's (WRITE-SHAPE / faults.py)
EXECUTOR_POINTS = ("before-intent", "after-intent", "mid-send", "after-send", "after-done")
DRIVER_POINTS = ("before-commit", "during-commit")


def values(n: int, tag: str = "v") -> list[bytes]:
    """``n`` distinct 24-byte values ``<tag>-000000-xxx...``."""
    return [f"{tag}-{i:06d}-".encode().ljust(24, b"x") for i in range(n)]


def spread(brokers: Sequence[Any], topic: str, vals: Sequence[bytes]) -> None:
    """``vals`` into every partition of every broker, round robin, one set per partition."""
    slots = [(b, p) for b in brokers for p in range(b.num_partitions)]
    for i, (b, p) in enumerate(slots):
        produce(b, topic, {p: list(vals[i :: len(slots)])})
    for b in brokers:
        b.wait_for_topic(topic)


@dataclass
class Outcome:
    """What a scenario ended with: the runs' exit codes and output, the target's values."""

    runs: list[int] = field(default_factory=list)
    output: str = ""
    fired: list[str] = field(default_factory=list)
    target: Counter[bytes] = field(default_factory=Counter)
    others: list[bytes] = field(default_factory=list)

    def done(self) -> dict[str, Any]:
        """The last run's ``DONE`` line (eo_driver.py), empty if it did not get there."""
        lines = [ln for ln in self.output.splitlines() if ln.startswith("DONE ")]
        if not lines:
            return {}
        # the JSON object, not what a JVM log line written on the same line added after it
        done, _ = json.JSONDecoder().raw_decode(lines[-1][5:])
        return dict(done)

    def of(self, tag: str) -> list[bytes]:
        """The target's values with this tag, each as often as it is there."""
        prefix = tag.encode() + b"-"
        return [v for v, n in self.target.items() if v.startswith(prefix) for _ in range(n)]


class OtherProducer:
    """Another producer appending small sets to the target topic until stopped (a thread)."""

    def __init__(self, brokers: Sequence[Any], topic: str) -> None:
        self.brokers, self.topic = brokers, topic
        self.sent: list[bytes] = []
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        try:
            while not self._stop.wait(0.05):
                b = rng.choice(self.brokers)
                n = len(self.sent)
                batch = [f"o-{n + i:06d}-".encode().ljust(24, b"x") for i in range(5)]
                self.sent += produce(b, self.topic, {rng.randrange(b.num_partitions): batch},
                                     rng.choice(("none", "gzip")))
        except BaseException as e:  # reported by stop()
            self._error = e

    def __enter__(self) -> OtherProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self._error is not None and exc[0] is None:
            raise self._error


class StreamRun:
    """The subprocess driver of one scenario; :meth:`until_done` runs it to the end."""

    def __init__(self, tmp: Path, args: dict[str, Any], fault: str | None) -> None:
        self.tmp, self.fault = tmp, fault
        self.marks = tmp / "marks"
        self.marks.mkdir(exist_ok=True)
        self.args = {"checkpoint": str(tmp / "cp"), "marks": str(self.marks), **args}
        self.args_file = tmp / "driver.json"
        self.args_file.write_text(json.dumps(self.args))
        self.log = tmp / "driver.out"

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "KAFKA_PYSPARK_FAULT_DIR": str(self.marks)}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")) if p)
        env.pop("KAFKA_PYSPARK_FAULT", None)
        if self.fault:
            env["KAFKA_PYSPARK_FAULT"] = self.fault
        return env

    def _driver_marker(self) -> Path | None:
        point = (self.fault or "").split(":")[0]
        return self.marks / f"{point}.fired" if point in DRIVER_POINTS else None

    def once(self) -> int:
        """One driver run to its end: its exit code (negative: killed by that signal)."""
        marker = self._driver_marker()
        already = marker is not None and marker.exists()
        with open(self.log, "ab") as out:
            out.write(f"\n=== run (fault {self.fault}) ===\n".encode())
            out.flush()
            proc = subprocess.Popen(
                [sys.executable, str(DRIVER), str(self.args_file)], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True)
        try:
            deadline = time.monotonic() + RUN_TIMEOUT
            while proc.poll() is None:
                if marker is not None and not already and marker.exists():
                    _killpg(proc)  # the driver dies at its point, JVM and all
                    return -signal.SIGKILL
                if time.monotonic() > deadline:
                    raise AssertionError(f"driver run over {RUN_TIMEOUT} s:\n{self.tail()}")
                time.sleep(0.05)
            return proc.returncode
        finally:
            _killpg(proc)  # whatever it left (a JVM whose Python died)

    def until_done(self, most: int = 3) -> Outcome:
        """Run the driver again from the checkpoint until it exits 0 (at most ``most`` runs)."""
        outcome = Outcome()
        for _ in range(most):
            rc = self.once()
            outcome.runs.append(rc)
            if rc == 0:
                break
            if rc > 0:  # the query failed (not killed): no restart, the test looks at why
                break
        outcome.output = self.log.read_text(errors="replace")
        outcome.fired = sorted(p.name for p in self.marks.glob("*.fired"))
        return outcome

    def tail(self, n: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)


def record_batches(zk: str, root: str = DELIVERY_ZK_ROOT
                   ) -> dict[str, tuple[list[int], list[int]]]:
    """Per sink (query id), the micro-batch ids in ZooKeeper: those with exactly-once records,
    and those whose node is empty (made ahead by the driver for the next micro-batch)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk, timeout=10)
    client.start(timeout=10)
    try:
        if not client.exists(root):
            return {}
        out = {}
        for sink in client.get_children(root):
            batches = sorted(int(b) for b in client.get_children(f"{root}/{sink}"))
            empty = [b for b in batches if not client.get_children(f"{root}/{sink}/{b}")]
            out[sink] = ([b for b in batches if b not in empty], empty)
        return out
    finally:
        client.stop()
        client.close()


def read_target(brokers: Sequence[Any], topic: str) -> Counter[bytes]:
    """The target topic, every value counted, by the independent reader (segment files)."""
    for b in brokers:
        b.flush()
    return log_reader.count([Path(b.log_dir) for b in brokers], topic)


@contextlib.contextmanager
def maybe_other_producer(on: bool, brokers: Sequence[Any], topic: str
                         ) -> Iterator[OtherProducer | None]:
    if not on:
        yield None
        return
    with OtherProducer(brokers, topic) as other:
        yield other


@contextlib.contextmanager
def standalone_cluster(tmp: Path, hosts: Sequence[str] = ("127.0.0.2", "127.0.0.3")
                       ) -> Iterator[str]:
    """A Spark standalone master and one worker per loopback address in ``hosts`` (1 core,
    1 GiB each), from the pip pyspark's ``spark-class``; yields the master URL.

    Distinct hosts matter: Spark never starts a speculative copy of a task on a host where an
    attempt of it runs, and every executor of ``local-cluster`` is on the same host.
    """
    import pyspark

    from kafka_pyspark.testing._zookeeper import free_port

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_NO_DAEMONIZE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = tmp / "cluster"
    logs.mkdir(exist_ok=True)

    def start(name: str, *args: str) -> None:
        with open(logs / f"{name}.out", "ab") as out:
            procs.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), *args], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(free_port()))
        for i, host in enumerate(hosts):
            start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", host,
                  "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                  "--work-dir", str(logs / f"work-{i}"), url)
        deadline = time.monotonic() + RUN_TIMEOUT
        master_log = logs / "master.out"
        while master_log.read_text(errors="replace").count("Registering worker") < len(hosts):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise AssertionError("the standalone cluster did not start:\n" + "\n".join(
                    (logs / f).read_text(errors="replace")[-2000:] for f in
                    sorted(os.listdir(logs)) if f.endswith(".out")))
            time.sleep(0.2)
        yield url
    finally:
        for p in procs:
            _killpg(p)
