"""One kazoo session, started lazily, whose every call is bounded in time and fails typed.

:class:`~kafka_pyspark._cluster.registry.Registry` knows 0.7's nodes; this module knows how to talk
to ZooKeeper: starting the session within ``connection_timeout_ms`` (TCP connect and handshake,
however long the session timeout), sending many requests at
once and collecting their answers (pipelined), retrying those lost with the connection (a lost
connection or an expired session: the registry holds no ephemeral nodes, so a new session is
as good as the old one) until ZooKeeper has answered none of them for
``max(session_timeout_ms, connection_timeout_ms)``,
and turning kazoo's exceptions into ours:

- not reached in time -> :class:`RegistryUnavailableError` (transient);
- the node's ACL refuses the session -> :class:`RegistryPermissionError` naming the node;
- the session was closed -> :class:`RegistryError` saying so; anything else kazoo raises ->
  :class:`RegistryError` naming the request and ZooKeeper.

Many writes at once (a group's first commit creates a node per broker-partition) go in
``multi`` transactions of a few hundred (:mod:`kafka_pyspark._cluster.zk_requests`) when the server
has them (3.4+): kazoo's cost is per request, and a transaction is one. A transaction that
fails is undone as a whole, and its writes are then sent one by one, each getting its own
answer. Many reads at once (a group's
offsets) go in ``multiRead`` requests (:mod:`kafka_pyspark._cluster.zk_reads`) when the server has
them (3.6+), each node answered on its own.

An answer a caller expects (no such node, the node exists already) is not an error: each
method below says what it answers instead. kazoo's log goes to
:data:`kafka_pyspark._cluster.zk_auth.KAZOO_LOG`; credentials never appear in a message or a repr.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafka_pyspark._cluster.zk_auth import CREDENTIALS_HINT, KAZOO_LOG
from kafka_pyspark._cluster.zk_reads import four_letter_word, multi_read_supported, multi_supported
from kafka_pyspark._cluster.zk_requests import (
    NewNode,
    Request,
    chunks,
    create,
    get,
    get_acls,
    get_children,
    multi_read,
    op_bytes,
    path_bytes,
    set_value,
    transaction,
)
from kafka_pyspark.errors import RegistryError, RegistryPermissionError, RegistryUnavailableError

__all__ = ["Created", "NewNode", "ZkSession", "multi_read_supported", "multi_supported"]

_FIRST_DELAY = 0.05  # seconds before the first retry of requests lost with the connection
_MAX_DELAY = 0.5
_T = TypeVar("_T")
#: the answer for an item of a transaction that was applied
_DONE = "done"


class Created(enum.Enum):
    """What :meth:`ZkSession.create` did."""

    CREATED = "created"
    EXISTS = "the node exists already"
    NO_PARENT = "its parent does not exist"


@dataclass
class _Batch:
    """One pipelined call: what it does and where (named in errors), its requests, the
    exceptions that are answers, its deadline (monotonic), and the answers so far."""

    what: str
    where: str
    requests: Sequence[Request]
    expected: Mapping[type[BaseException], Any]
    deadline: float
    answers: list[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.answers = [None] * len(self.requests)


class ZkSession:
    """A kazoo session to ``zk_connect`` (may carry a chroot). Thread-safe; idempotent close.

    ``auth_data``: kazoo's ``(scheme, credential)`` pairs, added to the session.
    """

    def __init__(
        self,
        zk_connect: str,
        *,
        session_timeout_ms: int,
        connection_timeout_ms: int,
        auth_data: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.zk_connect = zk_connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.op_timeout = max(session_timeout_ms, connection_timeout_ms) / 1000.0
        self.has_auth = bool(auth_data)
        self._auth_data = list(auth_data)  # never logged, never in a message or repr
        self._client: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._srvr: str | None = None  # the server's srvr answer (asked on first need)

    def __repr__(self) -> str:
        return f"ZkSession({self.zk_connect!r})"

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """End the session. Idempotent; later calls raise :class:`RegistryError`."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            _stop_quietly(client)

    @property
    def connected(self) -> bool:
        """True while the session is connected (False before first use and while kazoo is
        reconnecting): a call made now is likely to be answered promptly."""
        client = self._client
        return client is not None and bool(client.connected)

    @property
    def session_id(self) -> int | None:
        """The ZooKeeper session's id while connected (None otherwise): an ephemeral node lives
        as long as the session that made it, and kazoo starts a new one after an expiry."""
        client = self._client
        if client is None or not client.connected:
            return None
        return int(client.client_id[0]) if client.client_id else None

    def pipeline(
        self, what: str, where: str, requests: Sequence[Request],
        expected: Mapping[type[BaseException], Any],
    ) -> list[Any]:
        """Any ``requests`` in one pipelined round, bounded, retried and typed as every call
        here (:meth:`_pipeline`): for callers that need other requests than the methods above."""
        return self._pipeline(what, where, requests, expected)

    def _zk(self) -> Any:
        """The kazoo client, started on first use (bounded by the connection timeout)."""
        with self._lock:
            if self._closed:
                raise RegistryError(f"ZooKeeper {self.zk_connect}: the registry is closed")
            if self._client is None:
                self._client = self._start()
            return self._client

    def _start(self) -> Any:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import SequentialThreadingHandler
        from kazoo.retry import KazooRetry

        handler = _ConnectDeadline(SequentialThreadingHandler())
        client = KazooClient(
            hosts=self.zk_connect,
            timeout=self.session_timeout_ms / 1000.0,
            # Reconnect quickly after a ZooKeeper restart; each call is bounded separately.
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
            handler=handler,
            auth_data=self._auth_data or None,
            logger=KAZOO_LOG,
        )
        timeout = self.connection_timeout_ms / 1000.0
        handler.deadline = time.monotonic() + timeout
        try:
            with warnings.catch_warnings():
                # kazoo warns when the chroot does not exist; the registry reports missing nodes
                warnings.simplefilter("ignore")
                client.start(timeout=timeout)
        except Exception as e:
            _stop_quietly(client)
            raise RegistryUnavailableError(
                f"ZooKeeper {self.zk_connect}: could not connect within "
                f"{self.connection_timeout_ms} ms (zk.connectiontimeout.ms): {_describe(e)}"
            ) from e
        finally:
            handler.deadline = None  # connected (or stopped): kazoo's own timing from now on
        return client

    # --- the requests (each a kazoo method called directly) ----------------------------------

    def children(self, path: str) -> list[str] | None:
        """The children of ``path``; None if it does not exist."""
        return self.children_of([path], path)[0]

    def children_of(self, paths: Sequence[str], where: str) -> list[list[str] | None]:
        """The children of each of ``paths`` in one pipelined round (None for a path that
        does not exist). ``where`` names the batch in errors."""
        from kazoo.exceptions import NoNodeError

        reqs = [get_children(p) for p in paths]
        answers = self._pipeline("listing", where, reqs, {NoNodeError: None})
        return [None if a is None else list(a) for a in answers]

    def values(self, paths: Sequence[str], where: str) -> list[bytes | None]:
        """The values of ``paths`` (b"" for a node without one), None for a node that does
        not exist (it vanished since it was listed). ``where`` names the batch in errors."""
        from kazoo.exceptions import NoNodeError

        if len(paths) > 1 and self.has_multi_read():
            return self._values_together(paths, where)
        reqs = [get(p) for p in paths]
        answers = self._pipeline("reading", where, reqs, {NoNodeError: None})
        return [None if a is None else (a[0] if a[0] is not None else b"") for a in answers]

    def _values_together(self, paths: Sequence[str], where: str) -> list[bytes | None]:
        """:meth:`values` in ``multiRead`` requests
        (:func:`~kafka_pyspark._cluster.zk_requests.chunks`),
        one round: each node's answer is its own, an error names the node."""
        from kazoo.exceptions import NoNodeError

        batches = chunks(paths, path_bytes)
        out: list[bytes | None] = []
        for chunk, answers in zip(batches, self._pipeline(
                "reading", where, [multi_read(c) for c in batches], {}), strict=True):
            out.extend(self._typed(a, "reading", where, path, {NoNodeError: None})
                       if isinstance(a, Exception) else a
                       for path, a in zip(chunk, answers, strict=True))
        return out

    def set_values(self, items: Sequence[tuple[str, bytes]], where: str) -> list[bool]:
        """Overwrite each node's value; False for a node that does not exist. One round,
        in ``multi`` transactions where the server has them (:meth:`_transacted`)."""
        from kazoo.exceptions import NoNodeError

        answers = self._transacted(
            "writing", where, [], items, lambda it: set_value(*it),
            lambda tx, it: tx.set_data(*it), {NoNodeError: False})
        return [a is not False for a in answers]

    def create(
        self, nodes: Sequence[NewNode], where: str, *, together: Sequence[NewNode] = ()
    ) -> list[Created]:
        """Create each of ``nodes``, then each of ``together`` (persistent), in one pipelined
        round: ZooKeeper applies a session's requests in order, so a node may follow its
        parent. ``together`` (nodes expected not to exist) go in ``multi`` transactions
        (:meth:`_transacted`). What happened to each node, ``nodes`` first."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        answers = self._transacted(
            "creating", where, [create(*n) for n in nodes], together, lambda n: create(*n),
            lambda tx, n: tx.create(*n),
            {NoNodeError: Created.NO_PARENT, NodeExistsError: Created.EXISTS})
        return [a if isinstance(a, Created) else Created.CREATED for a in answers]

    def _transacted(
        self, what: str, where: str, first: Sequence[Request], items: Sequence[_T],
        one: Callable[[_T], Request], add: Callable[[Any, _T], object],
        expected: Mapping[type[BaseException], Any],
    ) -> list[Any]:
        """The answers to ``first``, then to ``one(item)`` for each of ``items``, in one
        pipelined round; ``items`` go in ``multi`` transactions
        (:func:`~kafka_pyspark._cluster.zk_requests.chunks`, made with ``add``) when the server has
        them, kazoo's cost being per request. A transaction that fails (one item's answer is
        not a success) is all undone: its items are sent one by one in a second round, for
        their own answers."""
        batched = len(items) > 1 and self.has_multi()
        batches = chunks(items, op_bytes) if batched else [[item] for item in items]
        answers = self._pipeline(what, where, [
            *first, *(one(c[0]) if len(c) == 1 else transaction(c, add, where) for c in batches)],
            expected)
        out = answers[:len(first)]
        redo: list[int] = []
        for chunk, answer in zip(batches, answers[len(first):], strict=True):
            if len(chunk) == 1:
                out.append(answer)
                continue
            if any(isinstance(a, Exception) for a in answer):
                redo.extend(range(len(out), len(out) + len(chunk)))
            out.extend([_DONE] * len(chunk))
        if redo:
            again = self._pipeline(what, where, [one(items[i - len(first)]) for i in redo],
                                   expected)
            for i, answer in zip(redo, again, strict=True):
                out[i] = answer
        return out

    def has_multi(self) -> bool:
        """Whether the server answers ``multi`` (3.4+), from its ``srvr`` four-letter word
        (asked on the session's connection's server, once it answered): a server that has no
        ``multi`` drops the request unanswered, so it is never sent unless known to work.

        The word is asked on a connection of its own, bounded by ``connection_timeout_ms``
        (connect and answer). Not connected now, or the word refused or reset: one node per
        request this time, asked again at the next need. No answer in time: the answer is
        taken as "no" for the session, so that a server holding the word unanswered delays
        one call, not every commit."""
        srvr = self._srvr_answer()
        return srvr is not None and multi_supported(srvr)

    def has_multi_read(self) -> bool:
        """Whether the server answers ``multiRead`` (3.6+), found out as :meth:`has_multi`
        does: an older server must never be sent it."""
        srvr = self._srvr_answer()
        return srvr is not None and multi_read_supported(srvr)

    def _srvr_answer(self) -> str | None:
        """The ``srvr`` answer of the session's server (:meth:`has_multi`): None when it
        could not be asked now, "" for the session when it did not answer in time."""
        if self._srvr is None:
            client = self._zk()
            try:  # the server the session is connected to (kazoo's command() asks it too)
                peer = client._connection._socket.getpeername()[:2]
            except (AttributeError, OSError):  # not connected now
                return None
            try:
                self._srvr = four_letter_word(peer, b"srvr", self.connection_timeout_ms / 1000.0)
            except TimeoutError:
                self._srvr = ""
            except OSError:
                return None
        return self._srvr

    def acls(self, path: str) -> list[Any] | None:
        """The ACL of ``path``; None if it does not exist."""
        return self.acls_of([path], path)[0]

    def acls_of(self, paths: Sequence[str], where: str) -> list[list[Any] | None]:
        """The ACL of each of ``paths`` in one pipelined round (None for a path that does not
        exist)."""
        from kazoo.exceptions import NoNodeError

        reqs = [get_acls(p) for p in paths]
        answers = self._pipeline("reading the ACL of", where, reqs, {NoNodeError: None})
        return [None if a is None else list(a[0]) for a in answers]

    # --- bounded, pipelined, typed -----------------------------------------------------------

    def _pipeline(
        self,
        what: str,
        where: str,
        requests: Sequence[Request],
        expected: Mapping[type[BaseException], Any],
    ) -> list[Any]:
        """Send all ``requests``, then collect the answers in order, each within the op
        timeout of the one before (of the start, for the first): however many requests, the
        call fails only after ZooKeeper answered none for that long. Those lost with the
        connection are sent again (backing off). An exception of a class in ``expected``
        answers its value; ``what`` and ``where`` name the batch in errors."""
        if not requests:
            return []
        batch = _Batch(what, where, requests, expected, time.monotonic() + self.op_timeout)
        pending = list(range(len(requests)))
        delay = _FIRST_DELAY
        while True:
            pending, lost = self._collect(batch, self._send(batch, pending))
            if not pending:
                return batch.answers
            if time.monotonic() + delay >= batch.deadline:
                raise RegistryUnavailableError(
                    f"ZooKeeper {self.zk_connect}: {what} {where} failed after retrying for "
                    f"{self.op_timeout * 1000:.0f} ms: {_describe(lost)}"
                ) from lost
            time.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)

    def _send(self, batch: _Batch, pending: Sequence[int]) -> list[tuple[int, Any]]:
        """Send the ``pending`` requests of ``batch``: their kazoo async results."""
        client = self._zk()
        sent = []
        for i in pending:
            try:
                sent.append((i, batch.requests[i].send(client)))
            except (ValueError, TypeError) as e:  # kazoo validates paths eagerly
                raise RegistryError(
                    f"ZooKeeper {self.zk_connect}: {batch.what} {batch.where}: {e}"
                ) from e
        return sent

    def _collect(
        self, batch: _Batch, sent: Sequence[tuple[int, Any]]
    ) -> tuple[list[int], BaseException | None]:
        """Fill ``batch.answers`` from ``sent``; the indexes lost with the connection, and
        why."""
        from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

        retryable = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)
        lost: list[int] = []
        why: BaseException | None = None
        for i, async_result in sent:
            try:
                left = max(batch.deadline - time.monotonic(), 0.001)
                batch.answers[i] = async_result.get(timeout=left)
            except retryable as e:  # ConnectionClosedError too (close() meanwhile): the
                why = e  # next _send then raises "the registry is closed"
                lost.append(i)
                continue
            except Exception as e:
                batch.answers[i] = self._typed(
                    e, batch.what, batch.where, batch.requests[i].node, batch.expected)
            # an answer: ZooKeeper is there, the next one gets the whole op timeout again
            batch.deadline = max(batch.deadline, time.monotonic() + self.op_timeout)
        return lost, why

    def _typed(self, e: Exception, what: str, where: str, node: str,
               expected: Mapping[type[BaseException], Any]) -> Any:
        """The value ``expected`` answers for ``e``'s class; otherwise ``e`` raised, as ours
        when it is kazoo's (:meth:`_translate`)."""
        cls = next((c for c in expected if isinstance(e, c)), None)
        if cls is not None:
            return expected[cls]
        error = self._translate(e, what, where, node)
        if error is None:
            raise e
        raise error from e

    def _translate(self, e: Exception, what: str, where: str, node: str
                   ) -> RegistryError | None:
        """kazoo's exception (not a lost connection) as ours; None for one not kazoo's."""
        from kazoo.exceptions import KazooException, NoAuthError
        from kazoo.handlers.threading import KazooTimeoutError

        if isinstance(e, NoAuthError):
            return self._denied(what, node)
        if isinstance(e, KazooTimeoutError):
            return RegistryUnavailableError(
                f"ZooKeeper {self.zk_connect}: {what} {where} timed out after "
                f"{self.op_timeout * 1000:.0f} ms"
            )
        if isinstance(e, KazooException):
            return RegistryError(
                f"ZooKeeper {self.zk_connect}: {what} {where} failed: {_describe(e)}"
            )
        return None

    def _denied(self, what: str, node: str) -> RegistryPermissionError:
        if what == "creating":
            node = f"{node.rsplit('/', 1)[0] or '/'} (creating {node})"
        how = (
            "the ZooKeeper credentials given lack that permission"
            if self.has_auth
            else f"no ZooKeeper credentials were given: {CREDENTIALS_HINT}"
        )
        denied = f"ZooKeeper {self.zk_connect}: {what} {node}: permission denied by the node's ACL"
        err = RegistryPermissionError(f"{denied} ({how})")
        err.denied, err.credentials_given = denied, self.has_auth
        return err


class _ConnectDeadline:
    """kazoo's threading handler, every socket wait of the first connect ending by
    ``deadline`` (monotonic) while it is set.

    kazoo gives each connect attempt's TCP connect and handshake read the *session* timeout,
    and ``start(timeout)``, once it gives up, stops the client by joining kazoo's thread, which
    is still in that wait: a ZooKeeper that accepts the connection and never answers (or one
    whose SYNs are lost) would hold the connect for the session timeout. kazoo makes all its
    socket waits through its handler, so bounding them here bounds the whole connect by the
    connection timeout without changing the session timeout ZooKeeper is asked for. Unset
    once connected: pings and reconnects keep kazoo's own timing."""

    def __init__(self, handler: Any) -> None:
        self._handler = handler
        self.deadline: float | None = None

    def __getattr__(self, name: str) -> Any:  # the rest of kazoo's handler interface
        return getattr(self._handler, name)

    def _bounded(self, timeout: float | None) -> float | None:
        deadline = self.deadline
        if deadline is None:
            return timeout
        left = max(deadline - time.monotonic(), 0.001)  # 0 would mean "do not wait at all"
        return left if timeout is None else min(timeout, left)

    def select(self, rlist: Any, wlist: Any, xlist: Any, timeout: float | None = None) -> Any:
        return self._handler.select(rlist, wlist, xlist, self._bounded(timeout))

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["timeout"] = self._bounded(kwargs.get("timeout"))
        return self._handler.create_connection(*args, **kwargs)


def _describe(e: BaseException | None) -> str:
    if e is None:
        return "unknown error"
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _stop_quietly(client: Any) -> None:
    with contextlib.suppress(Exception):  # best-effort shutdown of a kazoo session
        client.stop()
        client.close()
