"""The few ZooKeeper client frames the thread-free record connection sends and reads
(:mod:`kafka_pyspark._cluster.zk_line`): pure functions over bytes.

ZooKeeper's client protocol (its ``jute`` serialization, the same from 3.3 to 3.9): every frame
is a 4-byte big-endian length and a body; ``int`` is 4 bytes, ``long`` 8, ``boolean`` 1, all
big-endian; a ``ustring`` or ``buffer`` is a 4-byte length (-1 for none) and its bytes; a
``vector`` is a 4-byte count and its items. The bodies used here:

- ConnectRequest: ``int protocolVersion`` (0), ``long lastZxidSeen``, ``int timeOut`` (ms),
  ``long sessionId`` (0: a new session), ``buffer passwd`` (16 zero bytes for a new one),
  ``boolean readOnly`` (false; 3.4+ reads it, 3.3 ignores the trailing byte). The answer:
  ``int protocolVersion``, ``int timeOut`` (negotiated: 0 when the server refused the
  session), ``long sessionId``, ``buffer passwd`` (and a ``readOnly`` byte from 3.4 on).
- every later request: a header ``int xid``, ``int type``, then its body; every answer a
  header ``int xid``, ``long zxid``, ``int err`` (0: done), then its body when ``err`` is 0.
- create (type 1): ``ustring path``, ``buffer data``, ``vector<ACL> acl`` (an ACL: ``int
  perms``, ``ustring scheme``, ``ustring id``), ``int flags`` (0: persistent); answered with
  the created path.
- delete (type 2): ``ustring path``, ``int version`` (-1: any).
- multi (type 14, ZooKeeper 3.4+): per operation a MultiHeader (``int type``, ``boolean done``
  false, ``int err`` -1) and the operation's body, then a MultiHeader of type -1, done true;
  answered per operation with a MultiHeader (its type, or -1 and an ``int err`` after it when
  the transaction failed: then no operation was applied; a create's header is followed by its
  path) and a last header with done true.
- auth (type 100, xid -4): ``int type`` (0), ``ustring scheme``, ``buffer auth``; answered with
  a header of xid -4 (err -115 when the credentials are refused).
- closeSession (type -11): an empty body.
"""

from __future__ import annotations

import struct

__all__ = [
    "AUTH_XID", "CREATOR_ALL", "OPEN_ACL", "Acl", "FrameError", "Op", "auth_request",
    "close_request", "connect_request", "create_op", "create_request", "delete_op",
    "frame_length", "multi_error", "multi_request", "parse_connect", "parse_reply_header",
]

OP_CREATE = 1
OP_DELETE = 2
OP_MULTI = 14
#: a MultiHeader's type for an operation that failed (and for the last header)
OP_ERROR = -1
#: ZooKeeper's error for an operation of a failed transaction that did not fail itself
RUNTIME_INCONSISTENCY = -2
OP_AUTH = 100
OP_CLOSE = -11
AUTH_XID = -4
#: every permission (read, write, create, delete, admin)
PERMS_ALL = 31
#: a frame's length prefix
LENGTH = struct.Struct(">i")
_REPLY_HEADER = struct.Struct(">iqi")
_REQUEST_HEADER = struct.Struct(">ii")
_CONNECT_HEAD = struct.Struct(">iqiq")
_CONNECT_ANSWER = struct.Struct(">iiq")
_MULTI_HEADER = struct.Struct(">i?i")
#: a new session's password: 16 zero bytes
_NEW_PASSWORD = bytes(16)
#: the longest frame this connection accepts: ZooKeeper's default jute.maxbuffer (its answers
#: here are a header and a path)
MAX_FRAME = 1 << 20

#: an ACL entry: permissions, scheme, id
Acl = tuple[int, str, str]
#: an operation of a multi: its type, its body
Op = tuple[int, bytes]
#: ZooKeeper's open ACL (kazoo's OPEN_ACL_UNSAFE)
OPEN_ACL: tuple[Acl, ...] = ((PERMS_ALL, "world", "anyone"),)
#: every permission to the session's authenticated identities (kazoo's CREATOR_ALL_ACL)
CREATOR_ALL: tuple[Acl, ...] = ((PERMS_ALL, "auth", ""),)


class FrameError(ValueError):
    """A frame that does not parse as the answer expected (names what was wrong)."""


def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    return LENGTH.pack(len(raw)) + raw


def _buffer(value: bytes) -> bytes:
    return LENGTH.pack(len(value)) + value


def _framed(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def connect_request(session_timeout_ms: int) -> bytes:
    """The framed ConnectRequest of a new session asking for ``session_timeout_ms``."""
    return _framed(_CONNECT_HEAD.pack(0, 0, session_timeout_ms, 0) + _buffer(_NEW_PASSWORD)
                   + b"\x00")


def parse_connect(body: bytes) -> tuple[int, int]:
    """A ConnectResponse's body -> (negotiated session timeout in ms, session id); a timeout of
    0 means the server refused the session."""
    if len(body) < _CONNECT_ANSWER.size + LENGTH.size:
        raise FrameError(f"a connect answer of {len(body)} bytes (at least "
                         f"{_CONNECT_ANSWER.size + LENGTH.size} expected)")
    _, timeout_ms, session_id = _CONNECT_ANSWER.unpack_from(body)
    return timeout_ms, session_id


def auth_request(scheme: str, credential: str) -> bytes:
    """The framed request adding ``scheme`` credentials (``digest``: ``user:password``)."""
    body = (_REQUEST_HEADER.pack(AUTH_XID, OP_AUTH) + LENGTH.pack(0) + _text(scheme)
            + _buffer(credential.encode("utf-8")))
    return _framed(body)


def create_op(path: str, data: bytes, acl: tuple[Acl, ...]) -> Op:
    """Creating the persistent node ``path`` holding ``data``."""
    acls = b"".join(LENGTH.pack(perms) + _text(scheme) + _text(ident)
                    for perms, scheme, ident in acl)
    return OP_CREATE, (_text(path) + _buffer(data) + LENGTH.pack(len(acl)) + acls
                       + LENGTH.pack(0))


def delete_op(path: str) -> Op:
    """Deleting ``path``, whatever its version."""
    return OP_DELETE, _text(path) + LENGTH.pack(-1)


def create_request(xid: int, path: str, data: bytes, acl: tuple[Acl, ...]) -> bytes:
    """The framed request creating the persistent node ``path`` holding ``data``."""
    op, body = create_op(path, data, acl)
    return _framed(_REQUEST_HEADER.pack(xid, op) + body)


def multi_request(xid: int, ops: list[Op]) -> bytes:
    """The framed transaction of ``ops`` (all applied, or none)."""
    parts = [_REQUEST_HEADER.pack(xid, OP_MULTI)]
    for op, body in ops:
        parts += [_MULTI_HEADER.pack(op, False, -1), body]
    parts.append(_MULTI_HEADER.pack(OP_ERROR, True, -1))
    return _framed(b"".join(parts))


def multi_error(body: bytes) -> int:
    """A multi's answer -> 0 when it was applied, else the error of the operation that failed
    (the reply header's, if it has one)."""
    _, err = parse_reply_header(body)
    if err:
        return err
    pos, errors = _REPLY_HEADER.size, list[int]()
    while True:
        if len(body) < pos + _MULTI_HEADER.size:
            raise FrameError(f"a multi answer of {len(body)} bytes ends inside an operation's "
                             f"header at {pos}")
        op, done, _ = _MULTI_HEADER.unpack_from(body, pos)
        pos += _MULTI_HEADER.size
        if done:
            failed = [c for c in errors if c not in (0, RUNTIME_INCONSISTENCY)]
            return failed[0] if failed else (RUNTIME_INCONSISTENCY if errors else 0)
        if op == OP_ERROR:
            if len(body) < pos + LENGTH.size:
                raise FrameError(f"a multi answer of {len(body)} bytes ends inside an error at "
                                 f"{pos}")
            errors.append(LENGTH.unpack_from(body, pos)[0])
            pos += LENGTH.size
        elif op == OP_CREATE:
            if len(body) < pos + LENGTH.size:
                raise FrameError(f"a multi answer of {len(body)} bytes ends inside a path at "
                                 f"{pos}")
            n: int = LENGTH.unpack_from(body, pos)[0]
            if not 0 <= n <= len(body) - pos - LENGTH.size:
                raise FrameError(f"a created path of {n} bytes at {pos} in a multi answer of "
                                 f"{len(body)} bytes")
            pos += LENGTH.size + n
        elif op != OP_DELETE:
            raise FrameError(f"a multi answer holds an operation of type {op} at "
                             f"{pos - _MULTI_HEADER.size}")


def close_request(xid: int) -> bytes:
    return _framed(_REQUEST_HEADER.pack(xid, OP_CLOSE))


def frame_length(head: bytes) -> int:
    """The body length a frame's 4-byte prefix announces (checked against :data:`MAX_FRAME`)."""
    n: int = LENGTH.unpack(head)[0]
    if not 0 <= n <= MAX_FRAME:
        raise FrameError(f"a frame of {n} bytes announced (0 to {MAX_FRAME} expected)")
    return n


def parse_reply_header(body: bytes) -> tuple[int, int]:
    """An answer's body -> (xid, err)."""
    if len(body) < _REPLY_HEADER.size:
        raise FrameError(f"an answer of {len(body)} bytes (at least {_REPLY_HEADER.size} "
                         "expected)")
    xid, _, err = _REPLY_HEADER.unpack_from(body)
    return xid, err
