"""``kafka07 local-cluster`` as a user runs it: a child process that prints the zk.connect,
a client writes and reads through it, and SIGINT (Ctrl-C) leaves no process and no directory."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _cluster import kazoo_client

from kafka_pyspark.errors import OptionError
from kafka_pyspark.testing.cluster import LocalKafka

pytestmark = pytest.mark.zk

START_TIMEOUT = 90.0


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The child's stdout lines, read by a thread (None at EOF), so every wait is bounded."""
    out: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.rstrip("\n"))
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return out


def _until(lines: queue.Queue[str | None], prefix: str, seen: list[str]) -> str:
    while True:
        line = lines.get(timeout=START_TIMEOUT)
        assert line is not None, f"the command ended before printing {prefix!r}: {seen}"
        seen.append(line)
        if line.startswith(prefix):
            return line[len(prefix):]


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc/<pid>/stat's fourth field)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafka_pyspark.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_local_cluster_command_serves_a_client_and_ctrl_c_cleans_up() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_pyspark.cli", "local-cluster", "--brokers", "2",
         "--partitions", "3", "--chroot", "/kafka/local"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    seen: list[str] = []
    try:
        lines = _lines(proc)
        zk = _until(lines, "zk.connect=", seen)
        broker_list = _until(lines, "broker.list=", seen)
        data_dir = Path(_until(lines, "data in ", seen).split(";")[0])
        assert zk.endswith("/kafka/local") and zk.startswith("127.0.0.1:")
        assert [e.split(":")[0] for e in broker_list.split(",")] == ["0", "1"]
        assert data_dir.is_dir()
        (jvm,) = _children(proc.pid)  # ZooKeeper's JVM; the brokers are threads
        assert b"ZooKeeperServerMain" in Path(f"/proc/{jvm}/cmdline").read_bytes()
        zk_work = Path(os.readlink(f"/proc/{jvm}/cwd"))  # its zoo.cfg and log, apart
        assert (zk_work / "zoo.cfg").is_file()

        client = kazoo_client(zk)
        try:
            assert sorted(client.get_children("/brokers/ids")) == ["0", "1"]
        finally:
            client.stop()
            client.close()
        values = [f"line-{i}" for i in range(20)]
        produced = _cli("produce", "--zk", zk, "--topic", "local", stdin="\n".join(values) + "\n")
        assert produced.returncode == 0, produced.stderr
        consumed = _cli("consume", "--zk", zk, "--topic", "local", "--from", "earliest",
                        "--max-messages", "20")
        assert consumed.returncode == 0, consumed.stderr
        assert sorted(consumed.stdout.split()) == sorted(values)

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        assert _until(lines, "stopped", seen) == ""
        assert not data_dir.exists() and not zk_work.exists()
        with pytest.raises(ProcessLookupError):
            os.kill(jvm, 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_bad_settings_are_refused_before_anything_starts() -> None:
    with pytest.raises(OptionError, match="chroot"):
        LocalKafka(chroot="kafka")
    with pytest.raises(OptionError, match="brokers"):
        LocalKafka(brokers=0)
    with pytest.raises(OptionError, match="partitions"):
        LocalKafka(brokers=2, partitions=(1,))
    bad = _cli("local-cluster", "--chroot", "kafka//x")
    assert bad.returncode == 2 and "chroot" in bad.stderr and "Traceback" not in bad.stderr
