"""A TCP proxy in front of a real ZooKeeper that refuses some request types as an older server
does: it answers the first such request with ``UNIMPLEMENTED`` (-6) and closes the connection.

What a client meets when a VIP sends its session to an older member during a rolling upgrade
while its ``srvr`` probe (a connection of its own) reached a newer one: four-letter words are
passed through to the real (newer) server; ``multi`` (op 14) or ``multiRead`` (op 22) on a
session connection are refused. Every other request and every answer goes through unchanged.

The refusal is sent in order: ZooKeeper answers a session's requests in order (kazoo checks
each answer's xid against the oldest request it waits for), so the proxy stops forwarding at
the refused request and answers it once the server has answered every request forwarded before.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

MULTI = 14
MULTI_READ = 22
UNIMPLEMENTED = -6
_NOTIFICATION_XID = -1  # a watch event: not an answer to a request
_LENGTH = struct.Struct(">i")
_HEADER = struct.Struct(">ii")  # xid, type
_REPLY = struct.Struct(">iqi")  # xid, zxid, err
_TIMEOUT = 10.0


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, _LENGTH.unpack(head)[0])
    return None if body is None else head + body


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: RefusingProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = socket.create_connection(proxy.upstream, timeout=_TIMEOUT)
        self.server.settimeout(None)  # the proxy's close() ends the link
        self.forwarded = 0  # requests sent upstream (after the connect request)
        self.answered = 0  # answers passed back (after the connect answer)
        self.answers = threading.Condition()

    def run(self) -> None:
        try:
            first = _read_exact(self.client, 4)
            if first is None:
                return
            if first.isalpha():  # a four-letter word: the real server answers it
                self.server.sendall(first)
                self._pipe_raw()
                return
            body = _read_exact(self.client, _LENGTH.unpack(first)[0])
            if body is None:
                return
            self.server.sendall(first + body)  # the connect request
            threading.Thread(target=self._answers, daemon=True).start()
            self._requests()
        except OSError:
            pass
        finally:
            self.close()

    def _pipe_raw(self) -> None:
        while chunk := self.server.recv(65536):
            self.client.sendall(chunk)

    def _requests(self) -> None:
        while (frame := _read_frame(self.client)) is not None:
            xid, kind = _HEADER.unpack_from(frame, 4)
            if kind in self.proxy.refuse:
                self._refuse(xid, kind)
                return
            with self.answers:
                self.forwarded += 1
            self.server.sendall(frame)

    def _refuse(self, xid: int, kind: int) -> None:
        with self.answers:  # every request forwarded before it answered first
            self.answers.wait_for(lambda: self.answered >= self.forwarded, timeout=_TIMEOUT)
            reply = _REPLY.pack(xid, 0, UNIMPLEMENTED)
            self.client.sendall(_LENGTH.pack(len(reply)) + reply)
        self.proxy.refused.append(kind)

    def _answers(self) -> None:
        try:
            connected = _read_frame(self.server)
            if connected is None:
                return
            self.client.sendall(connected)
            while (frame := _read_frame(self.server)) is not None:
                with self.answers:
                    self.client.sendall(frame)
                    if _HEADER.unpack_from(frame, 4)[0] != _NOTIFICATION_XID:
                        self.answered += 1
                    self.answers.notify_all()
        except OSError:
            pass
        finally:
            self.close()

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class RefusingProxy:
    """``with RefusingProxy(("127.0.0.1", zk_port)) as proxy:`` then connect to
    ``proxy.address``; ``proxy.refused`` lists the request types refused so far, in order."""

    def __init__(self, upstream: tuple[str, int], refuse: frozenset[int] = frozenset(
            {MULTI, MULTI_READ})) -> None:
        self.upstream = upstream
        self.refuse = refuse
        self.refused: list[int] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopping = threading.Event()
        self._links: list[_Link] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                link = _Link(self, client)
            except OSError:
                client.close()
                continue
            self._links.append(link)
            threading.Thread(target=link.run, daemon=True).start()

    def close(self) -> None:
        self._stopping.set()
        self._listener.close()
        for link in self._links:
            link.close()
        self._thread.join(timeout=_TIMEOUT)

    def __enter__(self) -> RefusingProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

