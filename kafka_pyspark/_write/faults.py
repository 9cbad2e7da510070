"""Fault points of the exactly-once write protocol, for the fault suite (``tests/reliability``).

:func:`fault_point` is a no-op unless the environment variable ``KAFKA_PYSPARK_FAULT`` is
``<name>[:<kill>]`` for the point reached: then it creates ``$KAFKA_PYSPARK_FAULT_DIR/<name>.fired``
(``O_EXCL``: if that file exists the point has fired already and does nothing, so the retry goes
through) and SIGKILLs ``self`` (the default: this process, e.g. the Python worker or the driver)
or ``parent`` (the parent process, e.g. the executor JVM or the worker daemon); ``driver`` is the
same as ``self``, for points that run in the driver.

Points, in protocol order (:data:`POINTS`): executor side ``before-intent``, ``after-intent``
(intent recorded, nothing sent), ``mid-send`` (after the first of several message sets was
written to the socket), ``after-send`` (all sent and confirmed by the barrier, before "done"),
``after-done`` (done recorded, before the task returns its commit message); driver side
``before-commit`` (the driver's commit starts, before cleanup) and ``during-commit`` (after the
sink's own commit work, before returning to Spark).
"""

from __future__ import annotations

import os
import signal

__all__ = ["FAULT_DIR_ENV", "FAULT_ENV", "KILLS", "POINTS", "fault_point", "parse_fault"]

FAULT_ENV = "KAFKA_PYSPARK_FAULT"
FAULT_DIR_ENV = "KAFKA_PYSPARK_FAULT_DIR"
POINTS = (
    "before-intent",
    "after-intent",
    "mid-send",
    "after-send",
    "after-done",
    "before-commit",
    "during-commit",
)
KILLS = ("self", "parent", "driver")


def parse_fault(spec: str) -> tuple[str, str]:
    """``<name>[:<kill>]`` -> (name, kill); ValueError naming the variable for a bad one."""
    name, _, kill = spec.strip().partition(":")
    kill = kill or "self"
    if name not in POINTS or kill not in KILLS:
        raise ValueError(
            f"{FAULT_ENV}={spec!r}: expected <point>[:<kill>] with point one of "
            f"{', '.join(POINTS)} and kill one of {', '.join(KILLS)}"
        )
    return name, kill


def fault_point(name: str) -> None:
    """SIGKILL as ``KAFKA_PYSPARK_FAULT`` says when it names this point, once per run."""
    assert name in POINTS, name
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    point, kill = parse_fault(spec)
    if point != name:
        return
    directory = os.environ.get(FAULT_DIR_ENV)
    if not directory:
        raise ValueError(f"{FAULT_ENV} is set but {FAULT_DIR_ENV} is not (where it records that "
                         "a point fired)")
    try:
        fd = os.open(os.path.join(directory, f"{name}.fired"),
                     os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return  # fired already: the retry goes through
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    os.kill(os.getppid() if kill == "parent" else os.getpid(), signal.SIGKILL)
