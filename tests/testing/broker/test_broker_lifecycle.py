"""Embedded broker life cycle: start/stop/restart, shutdown with open connections, many
concurrent connections, options, and the command line entry point."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import TypedDict

import pytest
from _broker_raw import THREE, Conn, fetch_frame, wait_until
from _bytes import message
from _cluster import kazoo_client

from kafka_pyspark.errors import OptionError
from kafka_pyspark.testing.broker import EmbeddedBroker, EmbeddedBrokerError

REPO = Path(__file__).resolve().parents[3]


def test_context_manager_with_temporary_log_dir() -> None:
    with EmbeddedBroker() as b:
        assert b.running and b.port > 0 and b.host == "127.0.0.1" and b.broker_id == 0
        assert b.broker_list_entry == f"0:127.0.0.1:{b.port}"
        log_dir = b.log_dir
        with Conn(b) as c:
            c.produce("t", 0, THREE)
            assert c.fetch("t", 0, 0, 100) == fetch_frame(0, THREE)
        assert (log_dir / "t-0").is_dir()
    assert not b.running
    assert not log_dir.exists()


def test_given_log_dir_is_kept(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path / "d") as b, Conn(b) as c:
        c.produce("t", 0, THREE)
        c.barrier()
    assert (tmp_path / "d" / "t-0" / "00000000000000000000.kafka").read_bytes() == THREE


def test_start_stop_idempotent_and_repeatable(tmp_path: Path) -> None:
    b = EmbeddedBroker(log_dir=tmp_path)
    assert b.start() is b
    assert b.start() is b
    port = b.port
    b.stop()
    b.stop()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    b.start()
    assert b.port == port
    with Conn(b) as c:
        c.barrier()
    b.close()


def test_stop_closes_open_connections(tmp_path: Path) -> None:
    b = EmbeddedBroker(log_dir=tmp_path).start()
    conns = [Conn(b) for _ in range(5)]
    conns[0].produce("t", 0, THREE)
    conns[0].barrier()
    conns[1].send(struct.pack(">i", 100) + b"\x00\x01")  # half a request
    b.stop()
    for c in conns:
        assert c.closed_by_peer()
        c.close()


def test_port_in_use(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path / "a") as a:
        other = EmbeddedBroker(port=a.port, log_dir=tmp_path / "b")
        with pytest.raises(EmbeddedBrokerError, match="cannot listen"):
            other.start()
        assert not other.running


class BrokerOptions(TypedDict, total=False):
    """The ``EmbeddedBroker`` options that ``test_bad_options`` sets out of range."""

    num_partitions: int
    topic_partitions: dict[str, int]
    log_file_size: int
    flush_interval: int
    port: int
    max_message_size: int


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"num_partitions": 0}, "num_partitions"),
        ({"topic_partitions": {"t": 0}}, "topic_partitions"),
        ({"log_file_size": 0}, "log_file_size"),
        ({"flush_interval": 0}, "flush_interval"),
        ({"port": 70000}, "port"),
        ({"max_message_size": -1}, "max_message_size"),
    ],
)
def test_bad_options(kwargs: BrokerOptions, option: str) -> None:
    with pytest.raises(OptionError, match=option):
        EmbeddedBroker(**kwargs)


def test_wait_for_topic_without_zookeeper(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        with pytest.raises(TimeoutError):
            b.wait_for_topic("t", timeout=0.05)
        with Conn(b) as c:
            c.produce("t", 0, THREE)
            b.wait_for_topic("t", timeout=10.0)
            c.barrier()
        assert b.log_end("t", 0) == 51
        assert b.log_end("t", 1) is None


def test_many_concurrent_connections(tmp_path: Path) -> None:
    """16 connections appending to one partition and to their own, and reading, at once."""
    n_threads, n_sets = 16, 40
    errors: list[BaseException] = []

    def payload(i: int, j: int) -> bytes:
        return b"thread-%02d-set-%03d" % (i, j)

    with EmbeddedBroker(log_dir=tmp_path, num_partitions=n_threads, log_file_size=2000) as b:

        def work(i: int) -> None:
            try:
                with Conn(b) as c:
                    for j in range(n_sets):
                        m = message(payload(i, j))
                        c.produce("shared", 0, m * 2)
                        c.produce("own", i, m)
                        if j % 10 == 9:
                            frame = c.fetch("own", i, 0, 1 << 20)
                            assert frame[4:6] == b"\x00\x00"
                    c.barrier()
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert not any(t.is_alive() for t in threads)

        # every set landed whole (never interleaved), in each thread's order
        with Conn(b) as c:
            offset, seen = 0, []
            while True:
                frame = c.fetch("shared", 0, offset, 1 << 20)
                data = frame[6:]
                if not data:
                    break
                pos = 0
                while pos < len(data):
                    (n,) = struct.unpack_from(">i", data, pos)
                    body = data[pos + 4 : pos + 4 + n]
                    assert zlib.crc32(body[6:]) == struct.unpack_from(">I", body, 2)[0]
                    seen.append(body[6:])
                    pos += 4 + n
                offset += len(data)
            assert len(b.segment_files("shared", 0)) > 1
        assert len(seen) == 2 * n_threads * n_sets
        for i in range(n_threads):
            mine = [s for s in seen if s.startswith(b"thread-%02d-" % i)]
            assert mine == [payload(i, j) for j in range(n_sets) for _ in range(2)]
        for i in range(n_threads):
            assert b.log_end("own", i) == sum(len(message(payload(i, j))) for j in range(n_sets))


# --- command line --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Addr:
    def __init__(self, port: int) -> None:
        self.host = "127.0.0.1"
        self.port = port


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _run_cli(args: list[str]) -> subprocess.Popen[bytes]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    return subprocess.Popen(
        [sys.executable, "-m", "kafka_pyspark.testing.broker", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _stop_cli(proc: subprocess.Popen[bytes], sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    return proc.returncode, out.decode(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_runs_until_signal(tmp_path: Path, sig: int) -> None:
    port = _free_port()
    proc = _run_cli(["--port", str(port), "--log-dir", str(tmp_path), "--broker-id", "4",
                     "--partitions", "3", "--log-file-size", "40"])
    try:
        assert wait_until(lambda: _accepting(port) or proc.poll() is not None, timeout=30)
        assert proc.poll() is None
        with Conn(_Addr(port)) as c:
            for _ in range(4):
                c.produce("t", 2, THREE[:17])
            assert c.fetch("t", 2, 51, 100) == fetch_frame(0, THREE[:17])
            assert c.fetch("t", 3, 0, 100) == fetch_frame(3)
    finally:
        code, out = _stop_cli(proc, sig)
    assert code == 0, out
    assert f"listening on 127.0.0.1:{port}" in out
    assert len(list((tmp_path / "t-2").iterdir())) == 2


@pytest.mark.zk
def test_cli_with_zookeeper(tmp_path: Path, zk_connect: str) -> None:
    port = _free_port()
    proc = _run_cli(["--port", str(port), "--log-dir", str(tmp_path), "--broker-id", "2",
                     "--zk", zk_connect, "--partitions", "2", "--flush-interval", "1"])
    zk = kazoo_client(zk_connect)
    try:
        assert wait_until(lambda: zk.exists("/brokers/ids/2") is not None
                          or proc.poll() is not None, timeout=30)
        assert proc.poll() is None
        assert zk.get("/brokers/ids/2")[0].endswith(b":127.0.0.1:%d" % port)
        with Conn(_Addr(port)) as c:
            c.produce("t", 1, THREE)
            c.barrier()
        assert wait_until(lambda: zk.exists("/brokers/topics/t/2") is not None)
        assert zk.get("/brokers/topics/t/2")[0] == b"2"
        code, out = _stop_cli(proc, signal.SIGTERM)
        assert code == 0, out
        assert zk.exists("/brokers/ids/2") is None
        assert zk.exists("/brokers/topics/t/2") is None
    finally:
        if proc.poll() is None:
            _stop_cli(proc, signal.SIGKILL)
        zk.stop()
        zk.close()


def test_cli_bad_zookeeper_fails(tmp_path: Path) -> None:
    dead = _free_port()  # nothing listens here
    proc = _run_cli(["--port", "0", "--log-dir", str(tmp_path), "--zk", f"127.0.0.1:{dead}",
                     "--zk-connection-timeout", "1"])
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 1
    assert b"ZooKeeper" in out
