"""ZooKeeper's ``multiRead`` (3.6+): the values of many nodes in one request; which servers
have it and ``multi`` (3.4+), from their ``srvr`` four-letter word and what they refused
(:class:`ServerFeatures`).

kazoo sends one request per node read, and its cost is per request (its connection thread
wakes, polls and writes once for each): reading a group's thousands of offset nodes one
request each costs far more in this process than in ZooKeeper. ``multiRead`` carries many
``getData`` in one request and answers each on its own (a node that does not exist, or one
the session may not read, fails only its own answer), so it is as good as separate reads.
kazoo has no method for it; :class:`MultiRead` is a request kazoo's connection sends and
answers as it does its own (``type``, ``serialize``, ``deserialize``).
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "MULTI", "MULTI_READ", "MultiRead", "ServerFeatures", "four_letter_word",
    "multi_read_supported", "multi_supported", "send_multi_read",
]

#: the requests of many nodes a server may lack (the kinds :class:`ServerFeatures` tells)
MULTI = "multi"
MULTI_READ = "multiRead"

#: the first version whose servers answer ``multi`` (3.3 drops the request unanswered)
MULTI_SINCE = (3, 4)
#: the first version whose servers answer ``multiRead``; an older one must never be sent it
MULTI_READ_SINCE = (3, 6)
_SRVR_VERSION = re.compile(r"Zookeeper version: (\d+)\.(\d+)")
_WORD_ANSWER_MAX = 8192  # bytes of a four-letter word's answer read (its first line is enough)

_GET_DATA = 4
_ERROR = -1
_INT = struct.Struct(">i")
_MULTI_HEADER = struct.Struct(">i?i")  # type, done, err
_STAT_SIZE = 68  # czxid, mzxid, ctime, mtime (long); version, cversion, aversion (int);
# ephemeralOwner (long); dataLength, numChildren (int); pzxid (long)


def server_version(srvr: str) -> tuple[int, int] | None:
    """(major, minor) from a ``srvr`` four-letter-word answer; None if it has none (the
    word refused by a whitelist, or no answer)."""
    found = _SRVR_VERSION.search(srvr)
    return None if found is None else (int(found[1]), int(found[2]))


def four_letter_word(peer: tuple[str, int], word: bytes, timeout: float) -> str:
    """ZooKeeper's answer to ``word`` at ``peer`` (its first line; the server closes the
    connection after the whole answer), connect and answer within ``timeout`` seconds
    (:class:`TimeoutError` otherwise)."""
    deadline = time.monotonic() + timeout
    answer = b""
    with socket.create_connection(peer, timeout=timeout) as sock:
        sock.sendall(word)
        while b"\n" not in answer and len(answer) < _WORD_ANSWER_MAX:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(_WORD_ANSWER_MAX)
            if not chunk:
                break
            answer += chunk
    return answer.decode("utf-8", "replace")


def multi_supported(srvr: str) -> bool:
    """Whether the server whose ``srvr`` four-letter-word answer is ``srvr`` runs ``multi``.
    A server that refuses the word has a four-letter-word whitelist: 3.4.10 or later."""
    if "not in the whitelist" in srvr:
        return True
    version = server_version(srvr)
    return version is not None and version >= MULTI_SINCE


def multi_read_supported(srvr: str) -> bool:
    """Whether that server runs ``multiRead`` (3.6+). One that refuses the word may be a
    3.4 or 3.5: not known to."""
    version = server_version(srvr)
    return version is not None and version >= MULTI_READ_SINCE


class ServerFeatures:
    """Which of :data:`MULTI` and :data:`MULTI_READ` a session's server answers: what its
    ``srvr`` four-letter word says (asked once, on a connection of its own, of the server
    ``peer()`` names; None: not connected now, asked again at the next need; no answer within
    ``timeout`` seconds: "no" for good), less each kind it refused (answered UNIMPLEMENTED:
    an older server behind the same address, sent none of that kind again)."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._srvr: str | None = None
        self.refused: set[str] = set()

    def has(self, kind: str, peer: Callable[[], tuple[str, int] | None]) -> bool:
        if kind in self.refused:
            return False
        srvr = self._srvr_answer(peer)
        if srvr is None:
            return False
        return multi_supported(srvr) if kind == MULTI else multi_read_supported(srvr)

    def refuse(self, kind: str) -> bool:
        """The server refused a ``kind`` request; whether it is the first of that kind."""
        first = kind not in self.refused
        self.refused.add(kind)
        return first

    def _srvr_answer(self, peer: Callable[[], tuple[str, int] | None]) -> str | None:
        if self._srvr is None:
            address = peer()
            if address is None:
                return None
            try:
                self._srvr = four_letter_word(address, b"srvr", self._timeout)
            except TimeoutError:
                self._srvr = ""
            except OSError:
                return None
        return self._srvr


@dataclass(frozen=True)
class MultiRead:
    """One ``multiRead`` of the values of ``paths`` (chroot included, as sent).

    Its answer is a list with, for each path in order, the node's value (``b""`` for a node
    without one) or the kazoo exception of its own error code (``NoNodeError``, ...)."""

    type: ClassVar[int] = 22
    paths: tuple[str, ...]

    def serialize(self) -> bytes:
        out = bytearray()
        for path in self.paths:
            raw = path.encode("utf-8")
            out += _MULTI_HEADER.pack(_GET_DATA, False, -1)
            out += _INT.pack(len(raw)) + raw + b"\0"  # path, watch = false
        return bytes(out + _MULTI_HEADER.pack(-1, True, -1))

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[bytes | Exception]:
        from kazoo.exceptions import EXCEPTIONS

        answers: list[bytes | Exception] = []
        while True:
            kind, done, _err = _MULTI_HEADER.unpack_from(buf, offset)
            offset += _MULTI_HEADER.size
            if done:
                return answers
            if kind == _GET_DATA:
                (size,) = _INT.unpack_from(buf, offset)
                offset += _INT.size
                answers.append(b"" if size < 0 else bytes(buf[offset:offset + size]))
                offset += max(size, 0) + _STAT_SIZE
            elif kind == _ERROR:
                (code,) = _INT.unpack_from(buf, offset)
                offset += _INT.size
                answers.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead answered an operation of type {kind}")


def send_multi_read(client: Any, paths: Sequence[str]) -> Any:
    """Send one :class:`MultiRead` of ``paths`` (without the chroot) on kazoo ``client``;
    its kazoo async result. The same queueing as kazoo's own ``get_async``."""
    chroot = client.chroot or ""
    result = client.handler.async_result()
    client._call(MultiRead(tuple(chroot + p for p in paths)), result)
    return result
