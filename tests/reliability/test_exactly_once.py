"""The kafka07 sink under faults: every input value in the target topic exactly once (issue 24).

A stream of ``N`` unique values from a ``kafka07`` topic (two brokers, five partitions, several
micro-batches: ``maxBytesPerTrigger``) into a ``kafka07`` sink (``batch.size`` 10) with a
checkpoint, driven by eo_driver.py in a subprocess on ``local[2,4]`` (Spark retries a failed
task up to 4 times). A fault kills a process at one point of the write; the driver is started
again from the checkpoint when it was the one killed; then the target topic is read with the
independent reader (log_reader.py: the brokers' segment files, decoded from the 0.7 layout)
and each input value must be there exactly once. The same with ``at-least-once`` shows the
duplicates the guarantee exists to prevent (so the counting can fail).
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from eo_support import (
    DRIVER_POINTS,
    EXECUTOR_POINTS,
    Outcome,
    StreamRun,
    maybe_other_producer,
    read_target,
    record_batches,
    spread,
    standalone_cluster,
    values,
)
from rel_support import Recorder

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = [pytest.mark.spark, pytest.mark.zk, pytest.mark.own_spark]

N = 2000
AT_LEAST_ONCE = {"delivery.guarantee": "at-least-once"}
EXACTLY_ONCE = {"delivery.guarantee": "exactly-once"}
MAX_BYTES = 24 * 1024  # ~720 of the 34-byte messages per micro-batch: 3 micro-batches


def run_scenario(
    brokers: list[EmbeddedBroker], zk: str, tmp: Path, *, fault: str | None = None,
    options: dict[str, str] | None = None, other: bool = False,
    master: str = "local[2,4]", conf: dict[str, str] | None = None, **stage: Any,
) -> Outcome:
    """Input topic filled, the target pre-created on every partition (one foreign value
    each), the stream run to its end under ``fault``; the target's values counted."""
    tag = uuid.uuid4().hex[:8]
    source, target = f"src{tag}", f"dst{tag}"
    spread(brokers, source, values(N))
    spread(brokers, target, values(sum(b.num_partitions for b in brokers), "seed"))
    run = StreamRun(tmp, {
        "master": master, "conf": conf or {}, "zk": zk, "source": source, "target": target,
        "max_bytes": MAX_BYTES, "options": options or {},
        "log_dirs": [str(b.log_dir) for b in brokers], **stage,
    }, fault)
    with maybe_other_producer(other, brokers, target) as producer:
        outcome = run.until_done()
    outcome.target = read_target(brokers, target)
    outcome.others = producer.sent if producer is not None else []
    return outcome


def assert_once(outcome: Outcome, label: str) -> None:
    got = outcome.of("v")
    dup = {v: n for v, n in Counter(got).items() if n > 1}
    missing = set(values(N)) - set(got)
    assert not dup and not missing, (
        f"{label}: {len(dup)} duplicated, {len(missing)} missing; runs {outcome.runs}, "
        f"fired {outcome.fired}\n{outcome.output[-4000:]}")


def test_at_least_once_rerun_duplicates(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, record: Recorder
) -> None:
    """The guarantee off: the last micro-batch run again after its commit was lost (the driver
    killed after the sink's commit, before Spark's commit log) writes its rows again: the
    duplicates exactly-once removes, seen by the reader."""
    outcome = run_scenario(brokers, zk_connect, tmp_path, options=AT_LEAST_ONCE,
                           rerun_last=True)
    got = outcome.of("v")
    duplicated = len(got) - len(set(got))
    record("at-least-once: last micro-batch re-run (commit log entry lost)",
           expected=values(N), got=got,
           detail=f"re-ran micro-batch {outcome.done().get('rerun')}")
    assert outcome.runs == [0] and "rerun" in outcome.done(), outcome.output[-4000:]
    assert set(got) == set(values(N))  # nothing lost
    assert 0 < duplicated < N, "the re-run micro-batch's rows were not written twice"
    assert len(outcome.of("seed")) == sum(b.num_partitions for b in brokers)


# (fault, another producer beside the sink, runs expected); `make test` runs the unmarked ones
CASES = [
    pytest.param("mid-send", True, id="mid-send+other"),
    *(pytest.param(p, False, marks=pytest.mark.faults, id=p) for p in EXECUTOR_POINTS),
    *(pytest.param(p, False, marks=pytest.mark.faults, id=p) for p in DRIVER_POINTS),
    pytest.param("during-commit", True, marks=pytest.mark.faults, id="during-commit+other"),
]


@pytest.mark.parametrize(("point", "other"), CASES)
def test_exactly_once_under_fault(
    point: str, other: bool, brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path,
    record: Recorder,
) -> None:
    """SIGKILL at one point of the protocol (a Python worker on the executor side, Spark
    retries the task; the driver on its side, restarted from the checkpoint): each input
    value exactly once, the other producer's values all there once."""
    outcome = run_scenario(brokers, zk_connect, tmp_path, fault=point, options=EXACTLY_ONCE,
                           other=other)
    got = outcome.of("v")
    detail = f"runs {outcome.runs}" + (f", {len(outcome.others)} foreign values" if other else "")
    record(f"exactly-once: SIGKILL at {point}" + (" + another producer" if other else ""),
           expected=values(N), got=got, detail=detail)
    assert outcome.fired == [f"{point}.fired"], f"the point was not reached\n{outcome.output}"
    runs = [-9, 0] if point in DRIVER_POINTS else [0]
    assert outcome.runs == runs, outcome.output[-4000:]
    assert_once(outcome, point)
    # the driver's commits removed the records of every micro-batch before the last; the
    # next one's node, made ahead, is empty
    last = outcome.done()["last_batch"]
    assert all(kept == [last] and ahead == [last + 1]
               for kept, ahead in record_batches(zk_connect).values()), (
        record_batches(zk_connect), last)
    assert len(outcome.of("seed")) == sum(b.num_partitions for b in brokers)
    if other:
        assert outcome.others and sorted(outcome.of("o")) == sorted(outcome.others)


@pytest.mark.faults
def test_exactly_once_lost_commit_log_entry(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, record: Recorder
) -> None:
    """The driver killed after the sink's commit of the last micro-batch, before Spark wrote
    it to the commit log: the re-run of that micro-batch appends nothing (its done records
    outlive the sink's commit of it)."""
    outcome = run_scenario(brokers, zk_connect, tmp_path, options=EXACTLY_ONCE, rerun_last=True)
    record("exactly-once: last micro-batch re-run (commit log entry lost)",
           expected=values(N), got=outcome.of("v"),
           detail=f"re-ran micro-batch {outcome.done().get('rerun')}")
    assert outcome.runs == [0] and "rerun" in outcome.done(), outcome.output[-4000:]
    assert_once(outcome, "re-run after the sink's commit")


@pytest.mark.faults
def test_exactly_once_executor_jvm_killed(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, record: Recorder
) -> None:
    """A standalone cluster (``local-cluster``: a master, a worker and an executor JVM of
    their own) whose executor JVM is SIGKILLed mid-send (the Python worker's parent, without
    the daemon); the master starts a new executor, Spark runs the task again there."""
    outcome = run_scenario(brokers, zk_connect, tmp_path, fault="mid-send:parent",
                           options=EXACTLY_ONCE, master="local-cluster[1,1,1024]",
                           conf={"spark.python.use.daemon": "false"})
    lost = "ExecutorLostFailure" in outcome.output or "Lost executor" in outcome.output
    record("exactly-once: executor JVM SIGKILL at mid-send (local-cluster)",
           expected=values(N), got=outcome.of("v"), detail=f"runs {outcome.runs}")
    assert outcome.fired == ["mid-send.fired"], outcome.output[-4000:]
    assert lost, f"the executor was not lost\n{outcome.output[-4000:]}"
    assert outcome.runs == [0], outcome.output[-4000:]
    assert_once(outcome, "executor JVM killed")


@pytest.mark.faults
def test_non_deterministic_input_named(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, record: Recorder
) -> None:
    """Rows that differ on the retry (a random suffix per row), the first attempt killed after
    its intent: the retry fails with NonDeterministicInputError naming the batch, partition
    and broker-partition; nothing is written twice."""
    outcome = run_scenario(brokers, zk_connect, tmp_path, fault="after-intent",
                           options=EXACTLY_ONCE, random=True)
    got = outcome.of("v")
    prefixes = Counter(v[:24] for v in got)
    record("exactly-once: non-deterministic input, SIGKILL at after-intent",
           expected=len(got), got=sum(prefixes.values()),
           detail=f"runs {outcome.runs}, {N - len(prefixes)} input rows not written")
    assert outcome.fired == ["after-intent.fired"]
    assert outcome.runs == [1], outcome.output[-4000:]
    assert "NonDeterministicInputError" in outcome.output
    assert re.search(r"exactly-once write of sink \S+ batch \d+ partition \d+: for topic "
                     r"'dst\w+' broker-partition \d+-\d+", outcome.output), outcome.output[-4000:]
    assert max(prefixes.values()) == 1  # no input row twice (with two different suffixes)
    assert len(prefixes) < N  # the failed task's rows are not there


@pytest.mark.faults
def test_exactly_once_with_speculation(
    brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path, record: Recorder
) -> None:
    """``spark.speculation`` on a standalone cluster of two workers on two loopback hosts; a
    straggler task (its input stage sleeps) gets a speculative copy on the other host while
    it still runs: two live attempts of one task, each value still exactly once."""
    conf = {"spark.speculation": "true", "spark.speculation.interval": "200ms",
            "spark.speculation.quantile": "0.5", "spark.speculation.multiplier": "1.5",
            "spark.speculation.minTaskRuntime": "1s", "spark.executor.memory": "1g",
            "spark.cores.max": "2"}
    with standalone_cluster(tmp_path) as master:
        outcome = run_scenario(brokers, zk_connect, tmp_path, options=EXACTLY_ONCE,
                               master=master, conf=conf, slow={"batch": 1, "seconds": 20})
    marks = sorted(p.name for p in (tmp_path / "marks").glob("attempt-*"))
    copies = [m for m in marks if not m.endswith("-0")]
    record("exactly-once: spark.speculation, a straggler and its speculative copy",
           expected=values(N), got=outcome.of("v"),
           detail=f"runs {outcome.runs}, attempts {len(marks)}, copies {len(copies)}")
    assert outcome.runs == [0], outcome.output[-4000:]
    assert copies, f"no speculative copy ran: {marks}\n{outcome.output[-4000:]}"
    assert_once(outcome, "speculation")
