"""A ZooKeeper session without a thread, for the requests an exactly-once write task sends
after its claim: creating a node (a window's intent record) and a ``multi`` (``done`` with the
lock's release; docs/writing.md "Exactly once").

kazoo runs every request through its connection thread: in a Spark worker that thread wakes on
each answer and takes the interpreter's lock from the task's thread, about 1 ms of the worker's
CPU per request there (330 us on a quiet machine, against 30-40 us for the same request written
and read by the caller itself). :class:`ZkLine` writes a request on its own socket at once and
reads the answer when the caller asks: :meth:`Pending.ready` looks without waiting,
calling the :class:`Pending` waits (bounded).

It holds no ephemeral node and sends no pings: when it has not heard from ZooKeeper for half
the negotiated session timeout, the next request opens a new session first (the old one is
closed without waiting). What goes wrong with the connection (no server reachable in time, a
refused session or credentials, a lost connection, a late or malformed answer) ends it and is
answered as :class:`LineError`; a request ZooKeeper refuses is answered with its error code
(a node that exists, one missing). Either way the caller sends the request again through its
kazoo session, whose retries and typed errors decide (the connection itself never raises
anything else). The connect string is kazoo's: ``host[:port],...[/chroot]``.
"""

from __future__ import annotations

import collections
import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence

from kafka_pyspark._cluster.zk_frames import (
    AUTH_XID,
    LENGTH,
    Acl,
    FrameError,
    Op,
    auth_request,
    close_request,
    connect_request,
    create_request,
    frame_length,
    multi_error,
    multi_request,
    parse_connect,
    parse_reply_header,
)

__all__ = ["LineError", "Pending", "ZkLine", "split_connect"]

DEFAULT_PORT = 2181


def _reply_error(body: bytes) -> int:
    return parse_reply_header(body)[1]


class LineError(Exception):
    """The connection could not carry a request (the caller sends it another way)."""


def split_connect(zk_connect: str) -> tuple[list[tuple[str, int]], str]:
    """``host[:port],...[/chroot]`` (a host may be ``[v6 address]``) -> the servers, the chroot
    ('' for none; never ending in ``/``)."""
    hosts, slash, chroot = zk_connect.partition("/")
    servers: list[tuple[str, int]] = []
    for item in hosts.split(","):
        item = item.strip()
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port = item.partition(":")
        if host:
            servers.append((host, int(port) if port else DEFAULT_PORT))
    if not servers:
        raise LineError(f"no server in {zk_connect!r}")
    return servers, ("/" + chroot).rstrip("/") if slash else ""


class Pending:
    """A request sent on a :class:`ZkLine`: calling it returns ZooKeeper's error code (0: done)
    or raises :class:`LineError`."""

    def __init__(self, line: ZkLine, xid: int, error: Callable[[bytes], int]) -> None:
        self._line, self.xid, self.error = line, xid, error
        self.err: int | None = None
        self.failure: LineError | None = None

    def ready(self) -> bool:
        """Whether it is answered (or failed); reads what already arrived, never waits."""
        if self.err is None and self.failure is None:
            self._line.collect(self, wait=False)
        return self.err is not None or self.failure is not None

    def __call__(self) -> int:
        if self.err is None and self.failure is None:
            self._line.collect(self, wait=True)
        if self.failure is not None:
            raise self.failure
        assert self.err is not None
        return self.err


class ZkLine:
    """See the module. Thread-safe (one lock: a Python worker runs one task at a time, but a
    process may run several writers in threads); answers come in the order of the requests,
    whoever reads them."""

    def __init__(self, zk_connect: str, *, session_timeout_ms: int, connection_timeout_ms: int,
                 auth_data: Sequence[tuple[str, str]] = ()) -> None:
        self._servers, self._chroot = split_connect(zk_connect)
        self._session_ms = session_timeout_ms
        self._connect_s = connection_timeout_ms / 1000.0
        self._answer_s = max(session_timeout_ms, connection_timeout_ms) / 1000.0
        self._auth = list(auth_data)  # never logged, never in a message or repr
        self._sock: socket.socket | None = None
        self._next_server = 0
        self._xid = 0
        self._fresh_s = 0.0  # half the negotiated session timeout
        self._heard = 0.0  # monotonic: the last answer
        self._waiting: collections.deque[Pending] = collections.deque()
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ZkLine({self._servers!r}, {self._chroot!r})"

    def start_create(self, path: str, data: bytes, acl: tuple[Acl, ...]) -> Pending:
        """Send the creation of the persistent node ``path`` (under the chroot) now."""
        return self._start(lambda xid: create_request(xid, self._chroot + path, data, acl),
                           _reply_error)

    def start_multi(self, ops: list[tuple[str, Callable[[str], Op]]]) -> Pending:
        """Send a transaction (ZooKeeper 3.4+) now: each operation as its path (under the
        chroot) and what makes it from the full path (``zk_frames.create_op``, ``delete_op``);
        answered 0 when all were applied, else the error of the one that failed."""
        return self._start(lambda xid: multi_request(
            xid, [make(self._chroot + path) for path, make in ops]), multi_error)

    def _start(self, request: Callable[[int], bytes], error: Callable[[bytes], int]) -> Pending:
        with self._lock:
            sock = self._connected()
            self._xid += 1
            pending = Pending(self, self._xid, error)
            try:
                sock.sendall(request(self._xid))
            except OSError as e:
                failure = LineError(f"sending: {e}")
                self._broken(failure)
                raise failure from e
            self._waiting.append(pending)
            return pending

    def collect(self, pending: Pending, *, wait: bool) -> None:
        """Read answers until ``pending`` has one (``wait``), or while one is there already."""
        with self._lock:
            self._collect(pending, wait=wait)

    def _collect(self, pending: Pending, *, wait: bool) -> None:
        deadline = time.monotonic() + self._answer_s
        try:
            while pending in self._waiting and self._sock is not None:
                left = deadline - time.monotonic() if wait else 0.0
                if not select.select([self._sock], [], [], max(left, 0.0))[0]:
                    if wait:
                        raise LineError(f"no answer within {self._answer_s:g} s")
                    return
                self._answer(self._read_frame(self._sock, deadline))
        except (OSError, FrameError, LineError) as e:
            self._broken(e if isinstance(e, LineError) else LineError(str(e)))

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            self._xid += 1
            with contextlib.suppress(OSError):  # the session goes now, not at its timeout
                sock.send(close_request(self._xid))
            sock.close()
        self._fail_waiting(LineError("the connection was closed"))

    # --- the connection ----------------------------------------------------------------------

    def _connected(self) -> socket.socket:
        if self._sock is not None and time.monotonic() - self._heard < self._fresh_s:
            return self._sock
        if self._waiting:  # answers still to come on a session about to be replaced
            self._collect(self._waiting[-1], wait=True)
        self._close()
        deadline = time.monotonic() + self._connect_s
        failures = []
        for _ in self._servers:
            host, port = self._servers[self._next_server % len(self._servers)]
            self._next_server += 1
            try:
                self._sock = self._handshake(host, port, deadline)
                return self._sock
            except (OSError, FrameError, LineError) as e:
                failures.append(f"{host}:{port}: {e}")
        raise LineError("; ".join(failures))

    def _handshake(self, host: str, port: int, deadline: float) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=max(deadline - time.monotonic(),
                                                                  0.001))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(connect_request(self._session_ms))
            timeout_ms, _ = parse_connect(self._read_frame(sock, deadline))
            if timeout_ms <= 0:
                raise LineError("the server refused the session")
            for scheme, credential in self._auth:
                sock.sendall(auth_request(scheme, credential))
                xid, err = parse_reply_header(self._read_frame(sock, deadline))
                if xid != AUTH_XID or err != 0:
                    raise LineError(f"credentials not accepted (error {err})")
            sock.settimeout(self._answer_s)
        except BaseException:
            sock.close()
            raise
        self._fresh_s = timeout_ms / 2000.0
        self._heard = time.monotonic()
        return sock

    def _read_frame(self, sock: socket.socket, deadline: float) -> bytes:
        head = self._read_exact(sock, LENGTH.size, deadline)
        return self._read_exact(sock, frame_length(head), deadline)

    @staticmethod
    def _read_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise LineError("no whole answer in time")
            k = sock.recv_into(view[got:])
            if k == 0:
                raise LineError("the server closed the connection")
            got += k
        return bytes(buf)

    def _answer(self, body: bytes) -> None:
        xid, _ = parse_reply_header(body)
        if not self._waiting:
            raise LineError(f"an answer to request {xid}, none asked")
        pending = self._waiting.popleft()
        if xid != pending.xid:
            raise LineError(f"an answer to request {xid} where {pending.xid} was next")
        pending.err = pending.error(body)
        self._heard = time.monotonic()

    def _broken(self, failure: LineError) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        self._fail_waiting(failure)

    def _fail_waiting(self, failure: LineError) -> None:
        while self._waiting:
            self._waiting.popleft().failure = failure
