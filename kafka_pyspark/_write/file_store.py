"""Exactly-once records as files (``delivery.store``): :class:`FileStore`, the store of a
write without ZooKeeper (``broker.list``), on a file system every executor shares. The records
and their layout are :mod:`.store`'s (``<root>/<sink>/<batch>/<partition>/``: ``lock``,
``intent-NNNNN``, ``done``); each is written to a temporary name, synced and renamed."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Sequence

from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.store import (
    DONE,
    LOCK,
    POLL_FIRST,
    RECORDED,
    Claim,
    PendingClaim,
    Recording,
    intent_name,
    lock_timeout_error,
    poll_wait,
)

__all__ = ["FILE_LEASE_S", "FileStore"]

#: a file lock's lease: a holder refreshes it every quarter; older is a dead holder's
FILE_LEASE_S = 10.0


def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


class FileStore:
    """Records as files under ``root`` (``delivery.store``), on a file system every executor
    shares. The lock is an ``O_EXCL`` file holding the attempt's token, its mtime a lease the
    holder's thread refreshes every ``FILE_LEASE_S / 4``; older than ``FILE_LEASE_S``, it is a
    dead attempt's and is broken (renamed away, so only one waiter breaks it)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._token = uuid.uuid4().hex.encode()
        self._lock_path: str | None = None
        self._stop = threading.Event()

    def __repr__(self) -> str:
        return f"FileStore({self.root!r})"

    def _base(self, ident: TaskIdentity) -> str:
        return os.path.join(self.root, ident.sink, str(ident.batch), str(ident.partition))

    def start_claim(self, ident: TaskIdentity, timeout_s: float) -> PendingClaim:
        """:meth:`claim`, made when the answer is called (a file lock has no round trip to
        overlap)."""
        return PendingClaim(lambda: self.claim(ident, timeout_s))

    def claim(self, ident: TaskIdentity, timeout_s: float) -> Claim:
        base = self._base(ident)
        os.makedirs(base, exist_ok=True)
        lock = os.path.join(base, LOCK)
        deadline, delay = time.monotonic() + timeout_s, POLL_FIRST
        while not self._try_lock(lock):
            if _read(os.path.join(base, DONE)) is not None:
                return Claim(_read(os.path.join(base, DONE)), [])
            if time.monotonic() >= deadline:
                raise lock_timeout_error(ident, timeout_s, f"file {lock}")
            delay = poll_wait(deadline, delay)
        self._lock_path = lock
        self._stop.clear()
        threading.Thread(target=self._refresh, args=(lock,), daemon=True,
                         name="kafka07-lease").start()
        done = _read(os.path.join(base, DONE))
        if done is not None:
            self.release(ident)
            return Claim(done, [])
        names = sorted(n for n in os.listdir(base)
                       if n.startswith("intent-") and not n.endswith(".tmp"))
        return Claim(None, [_read(os.path.join(base, n)) or b"" for n in names])

    def _try_lock(self, lock: str) -> bool:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                age = time.time() - os.stat(lock).st_mtime
            except FileNotFoundError:
                return False
            if age > FILE_LEASE_S:
                stale = f"{lock}.{uuid.uuid4().hex}.stale"
                try:
                    os.rename(lock, stale)  # one waiter wins; the others find no file
                    os.unlink(stale)
                except FileNotFoundError:
                    pass
            return False
        os.write(fd, self._token)
        os.close(fd)
        return True

    def _refresh(self, lock: str) -> None:
        while not self._stop.wait(FILE_LEASE_S / 4):
            if _read(lock) != self._token:
                return
            try:
                os.utime(lock)
            except FileNotFoundError:
                return

    def holds(self) -> bool:
        return self._lock_path is not None and _read(self._lock_path) == self._token

    def verify(self, ident: TaskIdentity) -> bool:
        return self.holds()

    def start_intent(self, ident: TaskIdentity, index: int, data: bytes) -> Recording:
        _write_atomic(os.path.join(self._base(ident), intent_name(index)), data)
        return RECORDED

    def finish(self, ident: TaskIdentity, done: bytes) -> None:
        _write_atomic(os.path.join(self._base(ident), DONE), done)
        self.release(ident)

    def prepare(self, sink: str, batch: int) -> None:
        """Nothing to make ahead: a task makes its directories in one call."""

    def release(self, ident: TaskIdentity) -> None:
        self._stop.set()
        if self.holds() and self._lock_path is not None:
            os.unlink(self._lock_path)
        self._lock_path = None

    def forget_records(self, sink: str, records: Sequence[str]) -> None:
        self.forget(sink)  # one tree removal either way

    def forget(self, sink: str, below: int | None = None) -> None:
        import shutil

        top = os.path.join(self.root, sink)
        if below is None:
            shutil.rmtree(top, ignore_errors=True)
            return
        try:
            names = os.listdir(top)
        except FileNotFoundError:
            return
        for name in names:
            if name.isdigit() and int(name) < below:
                shutil.rmtree(os.path.join(top, name), ignore_errors=True)


