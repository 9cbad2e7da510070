"""One kazoo session, started lazily, whose every call is bounded in time and fails typed.

:class:`~kafka_pyspark._cluster.registry.Registry` knows 0.7's nodes; this module knows how to talk
to ZooKeeper: starting the session within ``connection_timeout_ms`` (TCP connect and handshake,
however long the session timeout: :mod:`kafka_pyspark._cluster.zk_connect`), sending many
requests at once and collecting their answers (pipelined), retrying those lost with the
connection (a lost connection or an expired session: the registry holds no ephemeral nodes, so
a new session is as good as the old one) until ZooKeeper has answered none of them for
``max(session_timeout_ms, connection_timeout_ms)``, and turning kazoo's exceptions into ours:

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
them (3.6+), each node answered on its own. A server that answers either with UNIMPLEMENTED
though its ``srvr`` said it has them (an older member behind a load balancer, while the probe
reached a newer one) is sent no more of that kind for the rest of the session: the nodes of
the refused request, and of every later one, go one per request.

An answer a caller expects (no such node, the node exists already) is not an error: each
method below says what it answers instead. kazoo's log goes to
:data:`kafka_pyspark._cluster.zk_auth.KAZOO_LOG`; credentials never appear in a message or a repr.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafka_pyspark._cluster.zk_auth import CREDENTIALS_HINT
from kafka_pyspark._cluster.zk_connect import describe, start_client, stop_quietly
from kafka_pyspark._cluster.zk_reads import (
    MULTI,
    MULTI_READ,
    ServerFeatures,
    multi_read_supported,
    multi_supported,
)
from kafka_pyspark._cluster.zk_requests import (
    NewNode,
    Request,
    chunks,
    create,
    delete,
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

__all__ = ["Created", "NewNode", "Started", "ZkSession", "applied", "multi_read_supported",
           "multi_supported", "transacted"]

_FIRST_DELAY = 0.05  # seconds before the first retry of requests lost with the connection
_MAX_DELAY = 0.5
_T = TypeVar("_T")
#: the answer for an item of a transaction that was applied
_DONE = "done"
#: the answer for a multi or multiRead the server refused (UNIMPLEMENTED): its nodes go again,
#: one per request
_REFUSED = "refused"
_LOG = logging.getLogger(__name__)


def applied(answer: Sequence[Any]) -> bool:
    """Whether a ``multi`` transaction's answer (one result per item, kazoo's) says it was
    applied: no item answered with an exception (then none of its items was)."""
    return not any(isinstance(a, Exception) for a in answer)


def transacted(answers: Sequence[Any]) -> list[Any] | None:
    """The answer of the ``multi`` transaction that ends a round (one per operation), or None
    when the server refused ``multi`` (:meth:`ZkSession.start_atomically`)."""
    return None if answers[-1] is _REFUSED else list(answers[-1])


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


class Started:
    """The answers of requests :meth:`ZkSession.start` sent: calling it collects them (waiting,
    retrying what the connection lost, as :meth:`ZkSession.pipeline` does); :meth:`ready` says
    whether every first answer is in, so that calling it does not wait on ZooKeeper."""

    def __init__(self, collect: Callable[[], list[Any]], sent: Sequence[tuple[int, Any]]) -> None:
        self._collect = collect
        self._sent = sent

    def __call__(self) -> list[Any]:
        return self._collect()

    def ready(self) -> bool:
        return all(async_result.ready() for _, async_result in self._sent)


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
        self._features = ServerFeatures(connection_timeout_ms / 1000.0)

    def __repr__(self) -> str:
        return f"ZkSession({self.zk_connect!r})"

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """End the session. Idempotent; later calls raise :class:`RegistryError`."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            stop_quietly(client)

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
                self._client = start_client(
                    self.zk_connect, session_timeout_ms=self.session_timeout_ms,
                    connection_timeout_ms=self.connection_timeout_ms,
                    auth_data=self._auth_data)
            return self._client

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
        answered = self._pipeline("reading", where, [multi_read(c) for c in batches], {})
        refused = [p for c, a in zip(batches, answered, strict=True) if a is _REFUSED for p in c]
        again = iter(self.values(refused, where) if refused else [])
        out: list[bytes | None] = []
        for chunk, answers in zip(batches, answered, strict=True):
            if answers is _REFUSED:
                out.extend(next(again) for _ in chunk)
                continue
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

    def delete(self, paths: Sequence[str], where: str,
               expected: Mapping[type[BaseException], Any]) -> list[Any]:
        """Delete each of ``paths`` in order (a node after its children), in one pipelined
        round of ``multi`` transactions where the server has them (:meth:`_transacted`): an
        answer per path, True for one deleted."""
        answers = self._transacted("deleting", where, [], paths, delete,
                                   lambda tx, p: tx.delete(p), expected, size=path_bytes)
        return [True if a is _DONE else a for a in answers]

    def atomically(
        self, what: str, where: str, add: Callable[[Any], object], *,
        first: Sequence[Request] = (), expected: Mapping[type[BaseException], Any] | None = None,
    ) -> list[Any] | None:
        """One ``multi`` transaction made by ``add(transaction)``, all of it or nothing, after
        ``first`` in the same pipelined round (their answers, by ``expected``, are dropped):
        the transaction's answer per operation (a result, or an exception instance for each
        operation when it failed), or None when the server has no ``multi`` (the caller does
        it another way)."""
        started = self.start_atomically(what, where, add, first=first, expected=expected)
        return None if started is None else transacted(started())

    def start_atomically(
        self, what: str, where: str, add: Callable[[Any], object], *,
        first: Sequence[Request] = (), expected: Mapping[type[BaseException], Any] | None = None,
    ) -> Started | None:
        """:meth:`atomically` in two halves, as :meth:`start`: None when the server has no
        ``multi``, else the round sent; :func:`transacted` of its answers is what
        :meth:`atomically` answers."""
        if not self.has_multi():
            return None
        tx = transaction([None], lambda t, _: add(t), where)
        return self.start(what, where, [*first, tx], expected or {})

    def _transacted(
        self, what: str, where: str, first: Sequence[Request], items: Sequence[_T],
        one: Callable[[_T], Request], add: Callable[[Any, _T], object],
        expected: Mapping[type[BaseException], Any], size: Callable[[_T], int] = op_bytes,
    ) -> list[Any]:
        """The answers to ``first``, then to ``one(item)`` for each of ``items``, in one
        pipelined round; ``items`` go in ``multi`` transactions
        (:func:`~kafka_pyspark._cluster.zk_requests.chunks`, made with ``add``) when the server has
        them, kazoo's cost being per request. A transaction that fails (one item's answer is
        not a success) is all undone: its items are sent one by one in a second round, for
        their own answers, and so are those of a transaction the server refused."""
        batched = len(items) > 1 and self.has_multi()
        batches = chunks(items, size) if batched else [[item] for item in items]
        answers = self._pipeline(what, where, [
            *first, *(one(c[0]) if len(c) == 1 else transaction(c, add, where) for c in batches)],
            expected)
        out = answers[:len(first)]
        redo: list[int] = []
        for chunk, answer in zip(batches, answers[len(first):], strict=True):
            if len(chunk) == 1:
                out.append(answer)
                continue
            if answer is _REFUSED or not applied(answer):
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
        one call, not every commit. A server that refused one (UNIMPLEMENTED): no."""
        return self._features.has(MULTI, self._peer)

    def has_multi_read(self) -> bool:
        """Whether the server answers ``multiRead`` (3.6+), found out as :meth:`has_multi`
        does: an older server must never be sent it."""
        return self._features.has(MULTI_READ, self._peer)

    def _peer(self) -> tuple[str, int] | None:
        """The server the session is connected to (kazoo's command() asks it too); None
        when not connected now."""
        client = self._zk()
        try:
            host, port = client._connection._socket.getpeername()[:2]
        except (AttributeError, OSError):
            return None
        return str(host), int(port)

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
        return self.start(what, where, requests, expected)()

    def start(
        self, what: str, where: str, requests: Sequence[Request],
        expected: Mapping[type[BaseException], Any],
    ) -> Started:
        """:meth:`pipeline` in two halves: the requests are sent now (kazoo's thread writes
        them and reads the answers), the :class:`Started` it returns collects the answers, as
        :meth:`pipeline` does. The caller works meanwhile; the op timeout runs from now."""
        if not requests:
            return Started(list, ())
        batch = _Batch(what, where, requests, expected, time.monotonic() + self.op_timeout)
        sent = self._send(batch, range(len(requests)))
        return Started(lambda: self._complete(batch, sent), sent)

    def _complete(self, batch: _Batch, sent: list[tuple[int, Any]]) -> list[Any]:
        delay = _FIRST_DELAY
        while True:
            pending, lost = self._collect(batch, sent)
            pending = self._unrefused(batch, pending)
            if not pending:
                return batch.answers
            if time.monotonic() + delay >= batch.deadline:
                raise RegistryUnavailableError(
                    f"ZooKeeper {self.zk_connect}: {batch.what} {batch.where} failed after "
                    f"retrying for {self.op_timeout * 1000:.0f} ms: {describe(lost)}"
                ) from lost
            time.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)
            sent = self._send(batch, pending)

    def _unrefused(self, batch: _Batch, pending: Sequence[int]) -> list[int]:
        """``pending`` but those of a kind the server refused, which answer :data:`_REFUSED`
        (their nodes go again, one per request) rather than being sent again."""
        out = []
        for i in pending:
            if batch.requests[i].kind in self._features.refused:
                batch.answers[i] = _REFUSED
            else:
                out.append(i)
        return out

    def _refuse(self, kind: str) -> None:
        """The server answered a ``kind`` request UNIMPLEMENTED: none is sent again."""
        if self._features.refuse(kind):
            _LOG.warning("ZooKeeper %s refused %s (UNIMPLEMENTED) though its srvr answer says "
                         "it has it: one node per request for the rest of the session",
                         self.zk_connect, kind)

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
        from kazoo.exceptions import (
            ConnectionLoss,
            OperationTimeoutError,
            SessionExpiredError,
            UnimplementedError,
        )

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
                kind = batch.requests[i].kind
                if kind is not None and isinstance(e, UnimplementedError):
                    self._refuse(kind)  # an older server: its nodes go one per request
                    batch.answers[i] = _REFUSED
                else:
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
                f"ZooKeeper {self.zk_connect}: {what} {where} failed: {describe(e)}"
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
