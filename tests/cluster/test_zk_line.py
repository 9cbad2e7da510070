"""The thread-free ZooKeeper connection of intent records (:mod:`kafka_pyspark._cluster.zk_line`):
its frames against bytes written by hand from ZooKeeper's jute layout, and its requests against
a real ZooKeeper (chroot, credentials, a session left idle, servers that are gone or mute)."""

from __future__ import annotations

import socket
import threading
import time
from typing import TYPE_CHECKING

import pytest
from _cluster import kazoo_client, silent_peer

from kafka_pyspark._cluster.zk_frames import (
    CREATOR_ALL,
    OPEN_ACL,
    FrameError,
    auth_request,
    connect_request,
    create_op,
    create_request,
    delete_op,
    frame_length,
    multi_error,
    multi_request,
    parse_connect,
    parse_reply_header,
)
from kafka_pyspark._cluster.zk_line import LineError, ZkLine, split_connect

if TYPE_CHECKING:
    from kazoo.client import KazooClient

NODE_EXISTS, NO_NODE = -110, -101


# --- frames, pure -------------------------------------------------------------------------------

def test_a_create_frame_byte_for_byte() -> None:
    assert create_request(7, "/a", b"xy", OPEN_ACL) == bytes.fromhex(
        "00000033"  # the body's length: 51
        "00000007" "00000001"  # xid 7, type 1 (create)
        "00000002" "2f61"  # path "/a"
        "00000002" "7879"  # data "xy"
        "00000001" "0000001f" "00000005" "776f726c64" "00000006" "616e796f6e65"  # world:anyone
        "00000000"  # flags: persistent
    )
    assert create_request(1, "/b", b"", CREATOR_ALL)[-20:] == bytes.fromhex(
        "0000001f" "00000004" "61757468" "00000000" "00000000")  # auth:"" , flags 0


def test_a_connect_and_an_auth_frame_byte_for_byte() -> None:
    assert connect_request(6000) == bytes.fromhex(
        "0000002d" "00000000" "0000000000000000" "00001770" "0000000000000000"
        "00000010" + "00" * 16 + "00")
    assert auth_request("digest", "u:p") == bytes.fromhex(
        "0000001d" "fffffffc" "00000064" "00000000" "00000006" "646967657374" "00000003" "753a70")


def test_answers_parse_and_short_ones_are_named() -> None:
    answer = bytes.fromhex("00000000" "00001770" "0000000000abcdef" "00000010") + bytes(16)
    assert parse_connect(answer + b"\x00") == (6000, 0xABCDEF)
    assert parse_reply_header(bytes.fromhex("00000009" "0000000000000005" "ffffff92")) == (
        9, NODE_EXISTS)
    with pytest.raises(FrameError, match="a connect answer of 3 bytes"):
        parse_connect(b"abc")
    with pytest.raises(FrameError, match="an answer of 15 bytes"):
        parse_reply_header(bytes(15))
    with pytest.raises(FrameError, match="a frame of -1 bytes"):
        frame_length(b"\xff\xff\xff\xff")
    assert frame_length(b"\x00\x00\x00\x10") == 16


def test_a_multi_frame_byte_for_byte() -> None:
    assert multi_request(3, [create_op("/d", b"z", OPEN_ACL), delete_op("/l")]) == bytes.fromhex(
        "00000057"  # the body's length: 87
        "00000003" "0000000e"  # xid 3, type 14 (multi)
        "00000001" "00" "ffffffff"  # a create: type 1, not done, err -1
        "00000002" "2f64" "00000001" "7a"  # path "/d", data "z"
        "00000001" "0000001f" "00000005" "776f726c64" "00000006" "616e796f6e65" "00000000"
        "00000002" "00" "ffffffff"  # a delete
        "00000002" "2f6c" "ffffffff"  # path "/l", version -1 (any)
        "ffffffff" "01" "ffffffff"  # the end: type -1, done
    )


REPLY_OK = "00000003" "0000000000000009" "00000000"  # xid 3, zxid 9, err 0


@pytest.mark.parametrize(("answer", "error"), [
    # applied: the create's header and path, the delete's header, the end
    (REPLY_OK + "00000001" "00" "00000000" "00000002" "2f64" "00000002" "00" "00000000"
     "ffffffff" "01" "ffffffff", 0),
    # failed on the delete (no node, -101): the create rolled back (ok or -2), no op applied
    (REPLY_OK + "ffffffff" "00" "00000000" "00000000" "ffffffff" "00" "ffffff9b" "ffffff9b"
     "ffffffff" "01" "ffffffff", -101),
    (REPLY_OK + "ffffffff" "00" "fffffffe" "fffffffe" "ffffffff" "00" "ffffff92" "ffffff92"
     "ffffffff" "01" "ffffffff", -110),
    # an error in the reply header itself
    ("00000003" "0000000000000009" "ffffff9a", -102),
])
def test_multi_answers(answer: str, error: int) -> None:
    assert multi_error(bytes.fromhex(answer)) == error


@pytest.mark.parametrize(("answer", "says"), [
    (REPLY_OK + "00000001" "00", "ends inside an operation's header at 16"),
    (REPLY_OK + "00000001" "00" "00000000" "000000ff" "2f64", "a created path of 255 bytes"),
    (REPLY_OK + "ffffffff" "00" "00000000", "ends inside an error at 25"),
    (REPLY_OK + "00000005" "00" "00000000", "an operation of type 5 at 16"),
])
def test_malformed_multi_answers_are_named(answer: str, says: str) -> None:
    with pytest.raises(FrameError, match=says):
        multi_error(bytes.fromhex(answer))


@pytest.mark.parametrize(("connect", "servers", "chroot"), [
    ("h:1", [("h", 1)], ""),
    ("h1:1,h2/c/d", [("h1", 1), ("h2", 2181)], "/c/d"),
    ("[::1]:3,h:4/", [("::1", 3), ("h", 4)], ""),
])
def test_connect_strings(connect: str, servers: list[tuple[str, int]], chroot: str) -> None:
    assert split_connect(connect) == (servers, chroot)


# --- a real ZooKeeper ---------------------------------------------------------------------------

pytestmark_zk = pytest.mark.zk


def line_of(connect: str, **kw: object) -> ZkLine:
    args: dict[str, object] = {"session_timeout_ms": 6000, "connection_timeout_ms": 3000}
    args.update(kw)
    return ZkLine(connect, **args)  # type: ignore[arg-type]


@pytestmark_zk
def test_creates_under_the_chroot_and_answers_error_codes(zk_connect: str,
                                                          kz: KazooClient) -> None:
    kz.create("/records")
    line = line_of(zk_connect)
    try:
        first = line.start_create("/records/intent-00000", b"window", OPEN_ACL)
        deadline = time.monotonic() + 10
        while not first.ready():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert first() == 0
        assert kz.get("/records/intent-00000")[0] == b"window"
        assert line.start_create("/records/intent-00000", b"x", OPEN_ACL)() == NODE_EXISTS
        assert line.start_create("/gone/intent-00000", b"x", OPEN_ACL)() == NO_NODE
        # two in flight, answered in order
        a, b = (line.start_create(f"/records/n{i}", b"%d" % i, OPEN_ACL) for i in range(2))
        assert (b(), a()) == (0, 0)
        assert sorted(kz.get_children("/records")) == ["intent-00000", "n0", "n1"]
    finally:
        line.close()


@pytestmark_zk
@pytest.mark.zk_needs("multi")
def test_a_multi_applies_all_or_nothing(zk_connect: str, kz: KazooClient) -> None:
    kz.create("/task/lock", b"token", makepath=True)
    line = line_of(zk_connect)
    try:
        def finish(done: bytes) -> int:
            return line.start_multi([("/task/done", lambda p: create_op(p, done, OPEN_ACL)),
                                     ("/task/lock", delete_op)])()

        assert finish(b"first") == 0
        assert kz.get_children("/task") == ["done"] and kz.get("/task/done")[0] == b"first"
        assert finish(b"second") == NODE_EXISTS  # done there, the lock gone: nothing applied
        assert kz.get("/task/done")[0] == b"first"
        kz.create("/task/lock", b"token")
        kz.delete("/task/done")
        kz.delete("/task/lock")
        assert finish(b"third") == NO_NODE  # no lock: done not created either
        assert kz.get_children("/task") == []
    finally:
        line.close()


@pytestmark_zk
def test_credentials_make_nodes_only_they_can_read(zk_connect: str) -> None:
    from kazoo.exceptions import NoAuthError

    creds = [("digest", "spark:pw")]
    owner = kazoo_client(zk_connect, auth_data=creds)
    stranger = kazoo_client(zk_connect)
    line = line_of(zk_connect, auth_data=creds)
    try:
        assert line.start_create("/secret", b"intent", CREATOR_ALL)() == 0
        assert owner.get("/secret")[0] == b"intent"
        assert owner.get_acls("/secret")[0][0].id.scheme == "digest"
        with pytest.raises(NoAuthError):
            stranger.get("/secret")
    finally:
        line.close()
        for c in (owner, stranger):
            c.stop()
            c.close()


@pytestmark_zk
def test_an_idle_line_opens_a_new_session_before_the_server_expires_it(
    zk_connect: str, kz: KazooClient,
) -> None:
    line = line_of(zk_connect, session_timeout_ms=1000)  # the fixture's shortest
    try:
        assert line.start_create("/a", b"", OPEN_ACL)() == 0
        first = line._sock
        time.sleep(0.7)  # more than half the session timeout without an answer
        assert line.start_create("/b", b"", OPEN_ACL)() == 0
        assert line._sock is not first
        time.sleep(1.5)  # the closed session is not left to expire on the server
        assert kz.exists("/b") is not None
    finally:
        line.close()


@pytestmark_zk
def test_a_lost_connection_is_a_line_error_and_the_next_request_reconnects(
    zk_connect: str, kz: KazooClient,
) -> None:
    line = line_of(zk_connect)
    try:
        assert line.start_create("/a", b"", OPEN_ACL)() == 0
        assert line._sock is not None
        line._sock.shutdown(socket.SHUT_RDWR)  # as a server that went away
        with pytest.raises(LineError):
            line.start_create("/b", b"", OPEN_ACL)()
        assert line.start_create("/c", b"", OPEN_ACL)() == 0
        assert kz.exists("/c") is not None
    finally:
        line.close()


def test_no_server_and_a_mute_server_end_within_the_connection_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, never listening: refused
    with silent_peer() as mute:
        line = line_of(f"127.0.0.1:{closed},127.0.0.1:{mute}", connection_timeout_ms=500)
        start = time.monotonic()
        with pytest.raises(LineError, match=f"127.0.0.1:{closed}: .*127.0.0.1:{mute}: "):
            line.start_create("/a", b"", OPEN_ACL)
        assert time.monotonic() - start < 5


def test_a_server_that_answers_nonsense_ends_the_line() -> None:
    """An answer announcing more than ZooKeeper's largest frame: a LineError, not a hang or an
    internal error."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def serve() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(1024)
                answer = bytes.fromhex("00000000" "00001770" "0000000000000001" "00000010")
                conn.sendall(len(answer + bytes(16)).to_bytes(4, "big") + answer + bytes(16))
                conn.recv(1024)
                conn.sendall(b"\x7f\xff\xff\xff")
                time.sleep(1)

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        line = line_of(f"127.0.0.1:{srv.getsockname()[1]}", session_timeout_ms=2000)
        with pytest.raises(LineError, match="a frame of 2147483647 bytes"):
            line.start_create("/a", b"", OPEN_ACL)()
        t.join(5)


@pytestmark_zk
def test_threads_sharing_a_line_each_get_their_own_answers(zk_connect: str,
                                                            kz: KazooClient) -> None:
    kz.create("/t")
    line = line_of(zk_connect)
    answers: dict[str, int] = {}

    def write(name: str) -> None:
        for i in range(50):
            pending = line.start_create(f"/t/{name}-{i}", name.encode(), OPEN_ACL)
            while not pending.ready():
                pass
            answers[f"{name}-{i}"] = pending()

    try:
        threads = [threading.Thread(target=write, args=(n,)) for n in ("a", "b", "c")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert answers == {f"{n}-{i}": 0 for n in "abc" for i in range(50)}
        assert len(kz.get_children("/t")) == 150
        assert {kz.get(f"/t/{n}-7")[0] for n in "abc"} == {b"a", b"b", b"c"}
    finally:
        line.close()
