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

:func:`settle` freezes the worker's heap (``gc.freeze()``) once per worker process, at its first
kafka07 read or write task: what is alive then (the imports, and the objects of that one task)
moves to the permanent generation, which collections skip, so Spark's per-task collection
only traverses what was created since. Why that is safe for other code in the worker:

- nothing else changes: thresholds, ``gc.isenabled()`` and callbacks stay as they are, and
  objects created later (every later task's, any user code's) are collected as before;
- frozen objects are still freed by reference counting; what a freeze keeps is only cyclic
  garbage made of objects that were alive at that moment. Module objects are never garbage; the
  first task's own cycles (a few small objects) stay for the worker's lifetime,
  once per worker process, never per task: memory stays bounded;
- only in a worker Spark reuses (``SPARK_REUSE_WORKER`` set, the daemon's own condition for
  that collection) *and* that Spark's daemon forked (``__main__`` is ``pyspark.daemon``); a
  one-task worker, the driver or any other process is left alone. A worker Spark starts on
  its own (``spark.python.use.daemon=false``) is not frozen: in Spark 4.0 such a worker ends by
  returning from ``pyspark.worker``'s main with its last answers still in its socket file's
  buffer, which only the file's finalization at exit writes, and a frozen (cyclic) file is never
  finalized: the JVM then saw the worker exit without its results, a "Python worker exited
  unexpectedly (crashed)" on every read. The daemon's forked workers flush explicitly.

``KAFKA_PYSPARK_GC_FREEZE=0`` in the executors' environment
(``spark.executorEnv.KAFKA_PYSPARK_GC_FREEZE``) turns it off.
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["DAEMON_MODULE", "FREEZE_ENV", "REUSE_ENV", "forked_by_daemon", "settle"]

FREEZE_ENV = "KAFKA_PYSPARK_GC_FREEZE"
REUSE_ENV = "SPARK_REUSE_WORKER"  # set by Spark for a reused worker (pyspark/daemon.py)
DAEMON_MODULE = "pyspark.daemon"  # the __main__ of Spark's daemon and of the workers it forks

_settled = False


def settle() -> None:
    """Freeze the worker's heap once per process, in a reused Spark worker (module docstring).
    The executor entry points call it: the readers' ``read`` before returning their generator,
    the writers' ``write`` before the task's first row."""
    global _settled
    if _settled:
        return
    _settled = True
    if not os.environ.get(REUSE_ENV) or os.environ.get(FREEZE_ENV, "1") == "0":
        return
    if not forked_by_daemon():
        return
    import kafka_pyspark.client  # noqa: F401  (the read path's modules, frozen with the rest)

    gc.freeze()


def forked_by_daemon() -> bool:
    """Whether this process runs as Spark's daemon or a worker it forked (their ``__main__``
    is ``pyspark.daemon``), not a worker Spark started on its own."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) == DAEMON_MODULE
