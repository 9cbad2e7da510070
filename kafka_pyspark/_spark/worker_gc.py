"""Python's cyclic garbage collector in Spark's executor Python workers (docs/running.md).

The read path itself triggers no collection: per fetch it allocates a few dozen GC-tracked
objects and frees them (or hands them to Spark, which frees them) before the next, so the
generation-0 count never gets near its threshold, and no collection runs during a read after
a worker's first task. A write task does trigger collections: an exactly-once task holds the
message sets of a window (and their digests) while its intent is recorded, thousands of objects
that outlive a young collection, so full collections follow during the task.

What costs is Spark's: a reused Python worker (``spark.python.worker.reuse``, on by default)
runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``), and that traverses every
object the worker holds, mostly the modules of pyspark, pyarrow, numpy and this package, so
its cost per task does not shrink with the task: for a stream's small micro-batches it can
exceed the read itself (figures: docs/running.md).

:func:`settle` freezes the worker's heap (``gc.freeze()``) at kafka07's entry points in a reused
worker whenever modules were imported since its last freeze, so in practice once or a few times
per worker process (its first read task, its first write task, the first call of each kind of
the driver side's, which Spark runs in its Python workers too: creating the reader or the
writer, committing a write): what is alive then (the imports, and the objects of that call)
moves to the permanent generation, which collections skip, so Spark's per-task collection only
traverses what was created since. A write task first makes the call pyspark's write wrapper
makes after ``write()`` returns: the commit message goes back to the JVM as
``pa.array([pickled])``, and pyarrow's ``array()`` imports pandas (a dependency of pyspark's SQL
workers) on its first call: made after the freeze, that import would leave pandas' modules
outside it, for Spark's collection to walk after every later write task (figures:
docs/running.md). Why that is safe for other code in the worker:

- nothing else changes: thresholds, ``gc.isenabled()`` and callbacks stay as they are, and
  objects created later (every later task's, any user code's) are collected as before;
- frozen objects are still freed by reference counting; what a freeze keeps is only cyclic
  garbage made of objects that were alive at that moment. Module objects are never garbage; the
  first call's own cycles (a few small objects) stay for the worker's lifetime, and a later
  freeze keeps what was alive at that call's start (what Spark's collection after the last task
  left: long-lived objects, and that call's own): only when something was imported since the
  last freeze, which a process does for a few kinds of call, never per task, so memory stays
  bounded;
- only in a worker Spark reuses (``SPARK_REUSE_WORKER`` set, the daemon's own condition for
  that collection) *and* that Spark's daemon forked (``__main__`` is ``pyspark.daemon``); a
  one-task worker, the driver's own Python process (the user's program) or any other process
  is left alone. A worker Spark starts on
  its own (``spark.python.use.daemon=false``) is not frozen: in Spark 4.0 such a worker ends by
  returning from ``pyspark.worker``'s main with its last answers still in its socket file's
  buffer, which only the file's finalization at exit writes, and a frozen (cyclic) file is never
  finalized: the JVM then saw the worker exit without its results, a "Python worker exited
  unexpectedly (crashed)" on every read. The daemon's forked workers flush explicitly.

``KAFKA_PYSPARK_GC_FREEZE=0`` in the executors' environment
(``spark.executorEnv.KAFKA_PYSPARK_GC_FREEZE``) and the driver's turns it off.
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["DAEMON_MODULE", "FREEZE_ENV", "REUSE_ENV", "forked_by_daemon", "settle"]

FREEZE_ENV = "KAFKA_PYSPARK_GC_FREEZE"
REUSE_ENV = "SPARK_REUSE_WORKER"  # set by Spark for a reused worker (pyspark/daemon.py)
DAEMON_MODULE = "pyspark.daemon"  # the __main__ of Spark's daemon and of the workers it forks

_modules_at_freeze = 0  # len(sys.modules) when this process last froze its heap


def settle(*, writing: bool = False) -> None:
    """Freeze the worker's heap, in a reused Spark worker, if modules were imported since it
    last froze (module docstring). Called at kafka07's entry points in Spark's Python workers:
    the readers' ``read`` before returning their generator, the writers' ``write``
    (``writing=True``) before the task's first row, and the driver side's calls (the data
    source's methods, the writers' commit and abort), which Spark also runs in them."""
    global _modules_at_freeze
    if not os.environ.get(REUSE_ENV) or os.environ.get(FREEZE_ENV, "1") == "0":
        return
    if not forked_by_daemon():
        return
    import kafka_pyspark.client  # noqa: F401  (the read path's modules, frozen with the rest)

    if writing:
        _as_the_commit_step_does()
    if len(sys.modules) == _modules_at_freeze:
        return  # nothing imported since the last freeze (one now would hold this call's own)
    _modules_at_freeze = len(sys.modules)
    gc.freeze()


def _as_the_commit_step_does() -> None:
    """The call pyspark's write wrapper makes after ``write()`` returns (the commit message
    as ``pa.array([pickled])``): its first call imports pandas, when installed, through
    pyarrow; made before the freeze, so those modules are frozen too."""
    import pyarrow as pa

    pa.array([b""])


def forked_by_daemon() -> bool:
    """Whether this process runs as Spark's daemon or a worker it forked (their ``__main__``
    is ``pyspark.daemon``), not a worker Spark started on its own."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) == DAEMON_MODULE
