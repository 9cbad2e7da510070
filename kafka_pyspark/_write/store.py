"""Where a task's exactly-once records live: ZooKeeper (:class:`ZkStore`) or a shared
directory (:class:`~.file_store.FileStore`, ``delivery.store``). Both keep, per
``(sink, batch, partition)``, a ``lock`` (ZooKeeper: an ephemeral node; files: an ``O_EXCL``
file with a lease its holder refreshes), ``intent-NNNNN`` records and a ``done`` record
(:mod:`.records`), under ``<root>/<sink>/<batch>/<partition>/``.

ZooKeeper requests of one task (a ``multi`` transaction counts as one; ZooKeeper 3.4 and later
have it), for a first attempt: :meth:`ZkStore.claim` one (the task's node and its lock created
together: a node that did not exist holds no record, so nothing is read; sent when the task's
first rows arrive and answered while it reads more, :meth:`ZkStore.start_claim`); the first
tasks of a batch whose node the driver did not make ahead (:meth:`ZkStore.prepare`, at the
commit of the batch before) one round more, of the missing parents and that ``multi`` again.
:meth:`ZkStore.start_intent` one per window (sent at once, its answer collected when the window
is sent: the task encodes the next window meanwhile; on a session of its own without a thread,
:mod:`kafka_pyspark._cluster.zk_line`, the kazoo session's path being its fallback),
:meth:`ZkStore.verify` one per window only when no request on the lock's session was answered
within the lease, :meth:`ZkStore.finish` one (``done`` and the lock's delete in one ``multi``, on
the same line): 3 for a one-window task. A retry or a re-run finds the node: its claim reads
``done`` and the intents (a round more), as without ``multi``. The driver deletes a write's
records in ``multi`` transactions of up to 500 nodes.
ZooKeeper's and kazoo's CPU is per request, several times that of one node in a ``multi``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from kafka_pyspark._cluster import ClusterOptions
from kafka_pyspark._cluster.zk_frames import CREATOR_ALL, OPEN_ACL, Acl, create_op, delete_op
from kafka_pyspark._cluster.zk_line import LineError, Pending, ZkLine
from kafka_pyspark._cluster.zk_requests import create, delete, get, get_children
from kafka_pyspark._cluster.zk_session import Started, ZkSession, applied, transacted
from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark.errors import DeliveryLockError

__all__ = ["RECORDED", "Claim", "PendingClaim", "RecordStore", "Recording", "ZkStore",
           "open_store"]

LOCK, DONE = "lock", "done"
POLL_FIRST, POLL_MAX = 0.05, 0.5
#: a ZooKeeper lock confirmed this recently is still this attempt's without asking again: the
#: server expires a session (and its ephemeral lock) only a session timeout after it last heard
#: from it, so a third of that (at most this) leaves a wide margin
FENCE_LEASE_MAX_S = 2.0


def _fence_clock() -> float:
    """Seconds on a clock that also runs while the machine is suspended (Linux's boot-time
    clock), so a holder suspended past its session never trusts the lease; else monotonic."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.monotonic() if boottime is None else time.clock_gettime(boottime)


class Recording(Protocol):
    """An intent record being written."""

    def __call__(self) -> None:
        """Return once the record is stored (else raise)."""

    def ready(self) -> bool:
        """Whether the store has answered: calling it now does not wait."""


class _Recorded:
    """A :class:`Recording` already done (a store that writes before it returns)."""

    def __call__(self) -> None:
        return None

    def ready(self) -> bool:
        return True


RECORDED: Recording = _Recorded()


class _LineRecording:
    """An intent record on its way to ZooKeeper on the worker's :class:`ZkLine`; where that
    does not answer 0 (done), it is sent again through the kazoo session (``again``), whose
    retries and errors decide (a create the line applied before failing is found there)."""

    def __init__(self, pending: Pending, again: Callable[[], Recording]) -> None:
        self._pending, self._again = pending, again

    def __call__(self) -> None:
        try:
            if self._pending() == 0:
                return
        except LineError:
            pass
        self._again()()

    def ready(self) -> bool:
        return self._pending.ready()


class _ZkRecording:
    """An intent record on its way to ZooKeeper (:meth:`ZkStore.start_intent`)."""

    def __init__(self, store: ZkStore, answers: Started, sent: float) -> None:
        self._store, self._answers, self._sent = store, answers, sent

    def __call__(self) -> None:
        self._answers()
        if self._store.holds():  # answered on the lock's session: it was alive when sent
            self._store.alive_since(self._sent)

    def ready(self) -> bool:
        return self._answers.ready()


def intent_name(index: int) -> str:
    return f"intent-{index:05d}"


class Claim(NamedTuple):
    """What the lock holder found: the done record, else the intent records in order."""

    done: bytes | None
    intents: list[bytes]


class PendingClaim:
    """A claim on its way (:meth:`RecordStore.start_claim`): calling it (once) finishes it,
    waiting for the store; :meth:`ready` says whether the store has answered its first round."""

    def __init__(self, finish: Callable[[], Claim],
                 answered: Callable[[], bool] | None = None) -> None:
        self._finish, self._answered = finish, answered

    def __call__(self) -> Claim:
        return self._finish()

    def ready(self) -> bool:
        return self._answered is None or self._answered()


class RecordStore(Protocol):
    def claim(self, ident: TaskIdentity, timeout_s: float) -> Claim: ...
    def start_claim(self, ident: TaskIdentity, timeout_s: float) -> PendingClaim: ...
    def holds(self) -> bool: ...
    def verify(self, ident: TaskIdentity) -> bool: ...
    def start_intent(self, ident: TaskIdentity, index: int, data: bytes) -> Recording: ...
    def finish(self, ident: TaskIdentity, done: bytes) -> None: ...
    def prepare(self, sink: str, batch: int) -> None: ...
    def release(self, ident: TaskIdentity) -> None: ...
    def forget(self, sink: str, below: int | None = None) -> None: ...
    def forget_records(self, sink: str, records: Sequence[str]) -> None: ...


def lock_timeout_error(ident: TaskIdentity, timeout_s: float, where: str) -> DeliveryLockError:
    return DeliveryLockError(
        f"exactly-once write of {ident.describe()}: another attempt of this task holds its lock "
        f"({where}) for longer than delivery.lock.timeout.ms ({timeout_s * 1000:.0f} ms); it "
        "may still be writing (a speculative or zombie attempt). Raise delivery.lock.timeout.ms "
        "or retry later"
    )


def poll_wait(deadline: float, delay: float) -> float:
    time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
    return min(delay * 2, POLL_MAX)


# --- ZooKeeper ---------------------------------------------------------------------------------

_SESSIONS: dict[tuple[Any, ...], ZkSession] = {}
_SESSIONS_LOCK = threading.Lock()


_LINES: dict[tuple[Any, ...], ZkLine] = {}


_C = TypeVar("_C", ZkSession, ZkLine)


def _cached(cache: dict[tuple[Any, ...], _C], make: type[_C], copts: ClusterOptions) -> _C:
    """One ``make`` per worker process and cluster (connect string, timeouts, credentials),
    made on first use (each connects when first asked)."""
    assert copts.zk_connect is not None
    key = (copts.zk_connect, copts.zk_session_timeout_ms, copts.zk_connection_timeout_ms,
           copts.zk_auth)
    with _SESSIONS_LOCK:
        made = cache.get(key)
        if made is None:
            made = cache[key] = make(
                copts.zk_connect, session_timeout_ms=copts.zk_session_timeout_ms,
                connection_timeout_ms=copts.zk_connection_timeout_ms,
                auth_data=[copts.zk_auth] if copts.zk_auth is not None else [])
        return made


def _line(copts: ClusterOptions) -> ZkLine:
    """The worker's thread-free connection for a task's intents and ``done``."""
    return _cached(_LINES, ZkLine, copts)


def _session(copts: ClusterOptions) -> ZkSession:
    """The worker's kazoo session: a task does not pay a session set-up each time."""
    return _cached(_SESSIONS, ZkSession, copts)


def close_sessions() -> None:
    """Close every cached session (tests whose ZooKeeper is gone: a cached session would go on
    trying to reconnect in its thread)."""
    with _SESSIONS_LOCK:
        sessions = list(_SESSIONS.values())
        lines = list(_LINES.values())
        _SESSIONS.clear()
        _LINES.clear()
    for zk in sessions:
        zk.close()
    for line in lines:
        line.close()


class ZkStore:
    """Records as nodes under ``root`` (a path under the ``zk.connect`` chroot)."""

    def __init__(self, copts: ClusterOptions, root: str) -> None:
        self._zk = _session(copts)
        self._copts = copts
        self.root = root
        self._token = uuid.uuid4().bytes
        self._session_id: int | None = None
        #: when a request that ZooKeeper answered on the lock's session was sent (_fence_clock)
        self._alive_at = float("-inf")
        self._lease = min(copts.zk_session_timeout_ms / 3000.0, FENCE_LEASE_MAX_S)
        # the records' ACL, as kazoo takes it and as the line writes it
        self._acl: Any = None
        self._line_acl: tuple[Acl, ...] = OPEN_ACL
        if self._zk.has_auth:
            from kazoo.security import CREATOR_ALL_ACL

            self._acl, self._line_acl = CREATOR_ALL_ACL, CREATOR_ALL

    def __repr__(self) -> str:
        return f"ZkStore({self._zk.zk_connect!r}, {self.root!r})"

    def _base(self, ident: TaskIdentity) -> str:
        return f"{self.root}/{ident.sink}/{ident.batch}/{ident.partition}"

    def _expected(self) -> dict[type[BaseException], Any]:
        from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError

        return {NodeExistsError: NodeExistsError, NoNodeError: None, NotEmptyError: None}

    def _parents(self, base: str) -> list[str]:
        """``base`` and every node above it, root first."""
        parts = base.strip("/").split("/")
        return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]

    def _fresh(self, base: str) -> Callable[[Any], None]:
        """The ``multi`` of a first attempt: the task's node and its lock, created together."""

        def add(tx: Any) -> None:
            tx.create(base, b"", self._acl)
            tx.create(f"{base}/{LOCK}", self._token, self._acl, ephemeral=True)

        return add

    def _claimed_fresh(self, base: str, answer: list[Any] | None) -> bool:
        """Whether the first attempt's ``multi`` created the task's node and its lock (its
        ``answer``; None: no ``multi`` on this server). Then no attempt has left a record
        (records go under that node, which did not exist) and this one holds the lock: nothing
        more to read. A missing parent (the first tasks of a batch whose node the driver did
        not make ahead) is created in one more round with the ``multi`` again. False (the node
        exists: a retry or a re-run; no ``multi``; the lock taken meanwhile): the claim reads
        what is there."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        if answer is not None and isinstance(answer[0], NoNodeError):
            parents = [create(p, b"", self._acl) for p in self._parents(base)[:-1]]
            answer = self._zk.atomically("claiming", base, self._fresh(base), first=parents,
                                         expected={NodeExistsError: None})
        return answer is not None and applied(answer)

    def claim(self, ident: TaskIdentity, timeout_s: float) -> Claim:
        return self.start_claim(ident, timeout_s)()

    def start_claim(self, ident: TaskIdentity, timeout_s: float) -> PendingClaim:
        """The claim in two halves: the first attempt's ``multi`` is sent now (the task reads
        its input meanwhile); calling the answer waits for it and, unless it took the lock,
        reads what earlier attempts left (:meth:`_claim_existing`)."""
        base = self._base(ident)
        sent = _fence_clock()
        started = self._zk.start_atomically("claiming", base, self._fresh(base))

        def finish() -> Claim:
            if self._claimed_fresh(base, None if started is None else transacted(started())):
                self._session_id, self._alive_at = self._zk.session_id, sent
                return Claim(None, [])
            return self._claim_existing(ident, timeout_s, base)

        return PendingClaim(finish, None if started is None else started.ready)

    def _claim_existing(self, ident: TaskIdentity, timeout_s: float, base: str) -> Claim:
        """The lock of a task whose node exists, waiting up to ``timeout_s`` for another
        attempt to release it; then its done record, else its intents."""
        from kazoo.exceptions import NodeExistsError

        parents = self._parents(base)
        reqs = [*(create(p, b"", self._acl) for p in parents),
                create(f"{base}/{LOCK}", self._token, self._acl, ephemeral=True),
                get(f"{base}/{LOCK}"), get(f"{base}/{DONE}"), get_children(base),
                get(f"{base}/{intent_name(0)}")]
        deadline, delay = time.monotonic() + timeout_s, POLL_FIRST
        while True:
            sent = _fence_clock()
            answers = self._zk.pipeline("claiming", base, reqs, self._expected())
            created, lock, done, children, first = answers[len(parents):]
            # "exists" after a lost connection may be our own create: the lock's value says
            mine = created is not NodeExistsError or (lock is not None and lock[0] == self._token)
            if mine or done is not None:
                break
            if time.monotonic() >= deadline:
                raise lock_timeout_error(ident, timeout_s, f"ZooKeeper node {base}/{LOCK}")
            delay = poll_wait(deadline, delay)
        self._session_id = self._zk.session_id if mine else None
        self._alive_at = sent
        if done is not None:
            self.release(ident)
            return Claim(bytes(done[0] or b""), [])
        names = sorted(n for n in (children or []) if n.startswith("intent-"))
        intents = [bytes(first[0])] if first is not None and names else []
        if len(names) > 1:
            more = self._zk.values([f"{base}/{n}" for n in names[1:]], base)
            intents += [bytes(v or b"") for v in more]
        return Claim(None, intents)

    def holds(self) -> bool:
        return self._session_id is not None and self._zk.session_id == self._session_id

    def verify(self, ident: TaskIdentity) -> bool:
        """:meth:`holds`, asked of ZooKeeper (one round trip): the lock node still holds this
        attempt's token. A process that was frozen past its session learns it here. Not asked
        again within the lease (``FENCE_LEASE_MAX_S``, at most a third of the session timeout)
        after a request answered on the lock's session was sent: the session, and the lock with
        it, cannot have expired since."""
        if not self.holds():
            return False
        if _fence_clock() - self._alive_at < self._lease:
            return True
        path = f"{self._base(ident)}/{LOCK}"
        sent = _fence_clock()
        (got,) = self._zk.pipeline("checking", path, [get(path)], self._expected())
        mine = got is not None and got[0] == self._token and self.holds()
        if mine:
            self._alive_at = sent
        return mine

    def start_intent(self, ident: TaskIdentity, index: int, data: bytes) -> Recording:
        """Sent at once on the worker's :class:`ZkLine`; through the kazoo session where the
        line cannot carry it (:class:`_LineRecording`)."""
        path = f"{self._base(ident)}/{intent_name(index)}"
        try:
            pending = _line(self._copts).start_create(path, data, self._line_acl)
        except LineError:
            return self._kazoo_intent(path, data)
        return _LineRecording(pending, lambda: self._kazoo_intent(path, data))

    def _kazoo_intent(self, path: str, data: bytes) -> Recording:
        sent = _fence_clock()
        answers = self._zk.start("recording", path, [create(path, data, self._acl)],
                                 self._expected())
        return _ZkRecording(self, answers, sent)

    def alive_since(self, sent: float) -> None:
        """A request sent at ``sent`` (:func:`_fence_clock`) was answered on the lock's
        session: the lock was this attempt's then (:meth:`verify` trusts it for the lease)."""
        self._alive_at = max(self._alive_at, sent)

    def finish(self, ident: TaskIdentity, done: bytes) -> None:
        """``done`` written and the lock deleted: one ``multi``; where that fails (no
        ``multi``; ``done`` there already, written by this call before a lost connection; the
        lock gone), both one by one, each tolerating what it finds."""
        base = self._base(ident)
        done_path, lock = f"{base}/{DONE}", f"{base}/{LOCK}"
        if self._finished_on_line(done_path, lock, done):
            self._session_id = None
            return

        def add(tx: Any) -> None:
            tx.create(done_path, done, self._acl)
            tx.delete(lock)

        answer = self._zk.atomically("finishing", base, add)
        if answer is None or not applied(answer):
            self._zk.pipeline("finishing", base, [create(done_path, done, self._acl),
                                                  delete(lock)], self._expected())
        self._session_id = None

    def _finished_on_line(self, done_path: str, lock: str, done: bytes) -> bool:
        """The finishing ``multi`` on the worker's :class:`ZkLine` (a server known to have
        ``multi``): whether it was applied. Anything else goes the kazoo session's way, which
        finds a ``done`` the line wrote before failing."""
        if not self._zk.has_multi():
            return False
        acl = self._line_acl
        try:
            return _line(self._copts).start_multi(
                [(done_path, lambda p: create_op(p, done, acl)), (lock, delete_op)])() == 0
        except LineError:
            return False

    def prepare(self, sink: str, batch: int) -> None:
        """Make ``batch``'s node ahead of its tasks (the driver, at the commit of the batch
        before it), so that each claims in one request (:meth:`_claimed_fresh`)."""
        nodes = self._parents(f"{self.root}/{sink}/{batch}")
        self._zk.create([(p, b"", self._acl) for p in nodes], nodes[-1])

    def release(self, ident: TaskIdentity) -> None:
        if self.holds():  # a new session's lock would be another attempt's
            path = f"{self._base(ident)}/{LOCK}"
            self._zk.pipeline("releasing", path, [delete(path)], self._expected())
        self._session_id = None

    def forget(self, sink: str, below: int | None = None) -> None:
        """Delete the sink's batches below ``below`` (None: the whole sink)."""
        top = f"{self.root}/{sink}"
        batches = self._zk.children(top) or []
        doomed = [f"{top}/{b}" for b in batches
                  if below is None or (b.isdigit() and int(b) < below)]
        self._delete_trees(doomed, top if below is None else None)

    def forget_records(self, sink: str, records: Sequence[str]) -> None:
        """Delete the whole sink knowing its nodes (``<batch>/<partition>/<name>`` each, from
        the tasks' reports): one pipelined round, leaves first. A node the reports did not
        name (a zombie attempt's lock) leaves its parent in place: then :meth:`forget`."""
        from kazoo.exceptions import NoNodeError, NotEmptyError

        top = f"{self.root}/{sink}"
        parents = {f"{top}/{r.rsplit('/', 1)[0]}" for r in records}
        parents |= {p.rsplit("/", 1)[0] for p in parents}
        order = [*(f"{top}/{r}" for r in records), *sorted(parents, key=len, reverse=True), top]
        answers = self._zk.delete(order, top, {NoNodeError: None, NotEmptyError: NotEmptyError})
        if NotEmptyError in answers:
            self.forget(sink)

    def _delete_trees(self, paths: Sequence[str], also: str | None) -> None:
        if not paths and also is None:
            return
        parts = [f"{p}/{c}" for p, cs in zip(paths, self._zk.children_of(paths, self.root)
                                              if paths else [], strict=True) for c in cs or []]
        leaves = [f"{p}/{c}" for p, cs in zip(parts, self._zk.children_of(parts, self.root)
                                              if parts else [], strict=True) for c in cs or []]
        order = [*leaves, *parts, *paths, *([also] if also else [])]
        self._zk.delete(order, self.root, self._expected())


def open_store(copts: ClusterOptions, zk_root: str, directory: str | None) -> RecordStore:
    """The store a write's options name: ``delivery.store`` if given, else ZooKeeper."""
    if directory is not None:
        from kafka_pyspark._write.file_store import FileStore  # it imports this module

        return FileStore(directory)
    return ZkStore(copts, zk_root)


StoreFactory = Callable[[], RecordStore]
