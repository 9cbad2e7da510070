"""Ctrl-C in ``kafka07 consume`` and ``dump``: a real SIGINT to the command in a subprocess
(its stdout a pipe nobody reads for a while, so it is stopped in the middle), the position it
prints, and ``--start`` resuming exactly there: the two runs' lines are every message once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kafka_pyspark._messages import encode_message_set
from kafka_pyspark.cli import main
from kafka_pyspark.client import Producer

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk

CLI = [sys.executable, "-m", "kafka_pyspark.cli"]
RESUME = "to resume where it stopped: --start "


def _values(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i:05d}-".encode() + b"x" * 90 for i in range(n)]


def _interrupted(argv: list[str]) -> tuple[list[bytes], str]:
    """Run the command, read its first bytes, leave its stdout unread until it blocks, send
    SIGINT; its lines (all it wrote) and stderr."""
    child = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    first = child.stdout.read(4096)  # it is writing; the pipe fills up behind this
    try:
        time.sleep(0.5)  # it blocks writing into the full pipe
        child.send_signal(signal.SIGINT)
        rest, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 130, err
    return (first + rest).splitlines(), err.decode()


def _run(argv: list[str]) -> list[bytes]:
    done = subprocess.run([*CLI, *argv], capture_output=True, timeout=120, check=True)
    return done.stdout.splitlines()


def test_consume_interrupted_resumes_exactly_where_it_stopped(
    broker: EmbeddedBroker, zk_connect: str
) -> None:
    plain, wrapped = _values("p0", 6000), _values("p1", 6000)
    with Producer({0: (broker.host, broker.port)}, timeout=10.0) as p:
        for i in range(0, len(plain), 500):
            p.send(0, "r", 0, encode_message_set(plain[i:i + 500]))
            p.send(0, "r", 1, encode_message_set(wrapped[i:i + 500], compression="gzip"))
            p.flush()
    broker.wait_for_topic("r")
    argv = ["consume", "--zk", zk_connect, "--topic", "r"]
    first, err = _interrupted(argv)
    assert 0 < len(first) < len(plain) + len(wrapped)  # stopped in the middle
    (line,) = [x for x in err.splitlines() if RESUME in x]
    assert line.startswith("kafka07: interrupted; ")
    where = line.split(RESUME)[1]
    assert [k.split("=")[0] for k in where.split(",")] == ["0-0", "0-1"]
    second = _run([*argv, "--start", where])
    assert first + second == plain + wrapped  # every message once, in order


def test_consume_start_skips_the_messages_of_a_wrapper_shown_already(
    broker: EmbeddedBroker, zk_connect: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    values = _values("w", 5)
    with Producer({0: (broker.host, broker.port)}, timeout=10.0) as p:
        p.send(0, "w", 1, encode_message_set([b"before"]))
        p.send(0, "w", 1, encode_message_set(values, compression="snappy"))
        p.flush()
    broker.wait_for_topic("w")
    at = len(encode_message_set([b"before"]))  # where the wrapper is stored
    argv = ["consume", "--zk", zk_connect, "--topic", "w"]
    assert main([*argv, "--start", f"0-1={at}+3"]) == 0
    assert capsysbinary.readouterr().out.splitlines() == values[3:]
    assert main([*argv, "--start", f"0-1={at}+3", "--partition", "0-1"]) == 2
    assert b"--start names the broker-partitions" in capsysbinary.readouterr().err


def test_dump_interrupted_resumes_exactly_where_it_stopped(tmp_path: Path) -> None:
    values = _values("d", 20000)
    path = tmp_path / "00000000000000000000.kafka"
    path.write_bytes(b"".join(encode_message_set(values[i:i + 1000])
                              for i in range(0, len(values), 1000)))
    first, err = _interrupted(["dump", str(path), "--values"])
    assert 0 < len(first) < len(values)
    (line,) = [x for x in err.splitlines() if RESUME in x]
    assert line.startswith(f"kafka07: {path}: interrupted after {len(first)} messages; ")
    second = _run(["dump", str(path), "--values", "--start", line.split(RESUME)[1]])
    full = _run(["dump", str(path), "--values"])
    assert first + second == full and len(full) == len(values)
