"""kafka07's entry points freeze the worker's heap in reused Spark workers only, when modules
were imported since the last freeze (:mod:`kafka_pyspark._spark.worker_gc`), and leave the
collector otherwise as it was.

Each case runs in a Python process of its own (a freeze lasts for the process), as Spark's
worker would: the reader's ``read`` on Spark's placeholder partition (it reads nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from kafka_pyspark._spark.worker_gc import FREEZE_ENV, REUSE_ENV

_SCRIPT = """
import gc, importlib.machinery, json, os, sys, weakref
if os.environ.get("AS_DAEMON_CHILD"):  # __main__ as in a worker Spark's daemon forked
    sys.modules["__main__"].__spec__ = importlib.machinery.ModuleSpec("pyspark.daemon", None)
from pyspark.sql.datasource import InputPartition
from kafka_pyspark._spark.read.batch import Kafka07BatchReader
from kafka_pyspark._spark.schema import READ_SCHEMA

class Node:
    pass

def cycle():
    node = Node()
    node.self = node
    return node, weakref.ref(node)

reader = Kafka07BatchReader({"broker.list": "0:127.0.0.1:9", "subscribe": "t"}, READ_SCHEMA)
state = (gc.isenabled(), gc.get_threshold(), len(gc.callbacks))
node, before = cycle()  # alive at the first read, garbage after it
rows = sum(b.num_rows for b in reader.read(InputPartition(0)))
first = gc.get_freeze_count()
del node
node, after = cycle()  # created later (a later task's objects, user code's)
del node
rows += sum(b.num_rows for b in reader.read(InputPartition(0)))
second = gc.get_freeze_count()
gc.collect()
print(json.dumps({
    "rows": rows, "first": first, "second": second,
    "state_kept": state == (gc.isenabled(), gc.get_threshold(), len(gc.callbacks)),
    "before_collected": before() is None, "after_collected": after() is None,
}))
"""


def _run(script: str, env: dict[str, str]) -> Any:
    """``script`` in a Python process of its own (this environment without the worker
    variables, then ``env``): what it printed, as JSON."""
    base = {k: v for k, v in os.environ.items() if k not in (REUSE_ENV, FREEZE_ENV)}
    done = subprocess.run([sys.executable, "-c", script], env={**base, **env},
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_a_reused_worker_freezes_once_at_its_first_read() -> None:
    got = _run(_SCRIPT, {REUSE_ENV: "1", "AS_DAEMON_CHILD": "1"})
    first = got.pop("first")
    assert isinstance(first, int) and first > 10_000  # pyspark's and pyarrow's modules
    assert got == {
        "rows": 0,
        "second": first,  # not again: later objects stay collectable
        "state_kept": True,
        "before_collected": False,  # the documented cost: frozen cycles stay (once)
        "after_collected": True,
    }


@pytest.mark.parametrize(
    "env",
    [
        {"AS_DAEMON_CHILD": "1"},
        {REUSE_ENV: "", "AS_DAEMON_CHILD": "1"},
        {REUSE_ENV: "1", FREEZE_ENV: "0", "AS_DAEMON_CHILD": "1"},
        # spark.python.use.daemon=false: Spark 4.0's worker leaves its last answers to its
        # socket file's finalization at exit, which a freeze would prevent
        {REUSE_ENV: "1"},
    ],
    ids=["not-reused", "reuse-empty", "opted-out", "not-forked-by-the-daemon"],
)
def test_no_freeze_outside_a_reused_worker_or_when_opted_out(env: dict[str, str]) -> None:
    assert _run(_SCRIPT, env) == {
        "rows": 0, "first": 0, "second": 0, "state_kept": True,
        "before_collected": True, "after_collected": True,
    }


#: what the writer scripts share: a one-column schema, and the writer options for a broker
_WRITER_SETUP = """
from pyspark.sql.types import BinaryType, StructField, StructType
from kafka_pyspark.testing.broker import EmbeddedBroker

schema = StructType([StructField("value", BinaryType())])

def writer_options(broker):
    return {"broker.list": broker.broker_list_entry, "topic": "t",
            "delivery.guarantee": "at-least-once"}
"""

_WRITE_SCRIPT = """
import gc, importlib.machinery, json, os, sys
if os.environ.get("AS_DAEMON_CHILD"):  # __main__ as in a worker Spark's daemon forked
    sys.modules["__main__"].__spec__ = importlib.machinery.ModuleSpec("pyspark.daemon", None)
import tempfile
from kafka_pyspark._spark.write.faces import Kafka07BatchWriter, Kafka07StreamWriter
""" + _WRITER_SETUP + """
counts = []
with tempfile.TemporaryDirectory() as logs, EmbeddedBroker(log_dir=logs) as broker:
    opts = writer_options(broker)
    writers = [Kafka07BatchWriter(opts, schema, False), Kafka07StreamWriter(opts, schema, False)]
    counts.append(gc.get_freeze_count())
    for writer in writers:  # made on the driver; write() is the task
        writer.write(iter([]))  # a task without rows
        counts.append(gc.get_freeze_count())
print(json.dumps(counts))
"""


@pytest.mark.parametrize("env", [{REUSE_ENV: "1", "AS_DAEMON_CHILD": "1"}, {REUSE_ENV: "1"}],
                         ids=["reused-daemon-worker", "not-forked-by-the-daemon"])
def test_the_write_entry_points_freeze_as_the_read_ones(env: dict[str, str]) -> None:
    """A write task in a reused worker freezes (exactly-once windows outlive young
    collections, so full collections run during writes); elsewhere nothing changes."""
    before, first, second = _run(_WRITE_SCRIPT, env)  # frozen objects before, after each write
    assert before == 0
    if "AS_DAEMON_CHILD" in env:
        assert first > 10_000 and second == first  # nothing imported since: not again
    else:
        assert first == second == 0


_AFTER_SCRIPT = """
import gc, importlib.machinery, json, os, pickle, struct, sys, tempfile
sys.modules["__main__"].__spec__ = importlib.machinery.ModuleSpec("pyspark.daemon", None)
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from kafka_pyspark._spark.read.batch import Kafka07BatchReader
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark._spark.write.faces import Kafka07BatchWriter
""" + _WRITER_SETUP + """
left = []
with tempfile.TemporaryDirectory() as logs, EmbeddedBroker(log_dir=logs) as broker:
    if os.environ.get("READ_FIRST"):
        reader = Kafka07BatchReader({"broker.list": broker.broker_list_entry, "subscribe": "t"},
                                    READ_SCHEMA)
        sum(b.num_rows for b in reader.read(InputPartition(0)))
        gc.collect()  # Spark's, after the task
    writer = Kafka07BatchWriter(writer_options(broker), schema, False)  # made on the driver
    for _ in range(2):
        # as Spark's Arrow stream gives them (pa.array() would import pandas before the task)
        offsets, data = pa.py_buffer(struct.pack("<11i", *range(11))), pa.py_buffer(b"v" * 10)
        rows = pa.RecordBatch.from_arrays(
            [pa.Array.from_buffers(pa.binary(), 10, [None, offsets, data])], names=["value"])
        message = writer.write(iter([rows]))  # the task
        pa.array([pickle.dumps(message)])  # pyspark's write wrapper, after write() returns
        gc.collect()  # Spark's, after the task
        left.append(len(gc.get_objects()))
print(json.dumps({"left": left, "pandas": "pandas" in sys.modules}))
"""


@pytest.mark.parametrize("read_first", [False, True], ids=["write-first", "read-then-write"])
def test_spark_collection_after_a_write_task_walks_only_that_task(read_first: bool) -> None:
    """After a write task, pyspark hands the commit message back as ``pa.array([pickled])``,
    whose first call imports pandas through pyarrow: those modules are frozen with the rest
    (at the write task's start, or again after a read task froze first), so Spark's collection
    after each task walks a few hundred objects, not pandas' modules."""
    got = _run(_AFTER_SCRIPT, {REUSE_ENV: "1", **({"READ_FIRST": "1"} if read_first else {})})
    assert got["pandas"]  # a dependency: pyarrow's array() imported it, as in Spark
    assert all(n < 2_000 for n in got["left"]), got["left"]


_PLANNER_SCRIPT = """
import gc, importlib.machinery, json, pickle, sys, tempfile
sys.modules["__main__"].__spec__ = importlib.machinery.ModuleSpec("pyspark.daemon", None)
from kafka_pyspark._spark.source import Kafka07DataSource
""" + _WRITER_SETUP + """
left = []
with tempfile.TemporaryDirectory() as logs, EmbeddedBroker(log_dir=logs) as broker:
    opts = writer_options(broker)
    for _ in range(2):  # two save()s planned in one reused worker
        writer = pickle.loads(pickle.dumps(Kafka07DataSource(dict(opts)).writer(schema, False)))
        writer.commit([])  # (Spark commits in another call, in a worker like this one)
        del writer
        gc.collect()  # Spark's, after the call
        left.append(len(gc.get_objects()))
print(json.dumps({"left": left, "frozen": gc.get_freeze_count()}))
"""


def test_the_driver_sides_calls_settle_the_worker_spark_runs_them_in() -> None:
    """Spark runs the data source's planning calls (here ``writer()``, then the writer's
    ``commit``) in reused Python workers too, and collects after each: frozen like an
    executor's, the collection walks a few hundred objects, not the imports."""
    got = _run(_PLANNER_SCRIPT, {REUSE_ENV: "1"})
    assert got["frozen"] > 10_000
    assert all(n < 2_000 for n in got["left"]), got["left"]
