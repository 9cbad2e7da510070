"""The ``kafka07`` operator command against a real ZooKeeper and embedded brokers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from _cluster import THREE, kazoo_client, produce_direct, unanswering_broker

from kafka_pyspark._cluster import Registry
from kafka_pyspark.cli import main

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = pytest.mark.zk

FACTS = {v: f"magic=1 crc={zlib.crc32(v)} valid=true" for v in THREE}


def _out(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def hung_broker(zk_connect: str) -> Iterator[int]:
    """Broker 1 registered with topic ``t`` at a port that never answers."""
    with unanswering_broker(zk_connect, 1) as port:
        yield port


def test_offsets_by_zookeeper(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "t", 1, THREE, "none")
    broker.wait_for_topic("t")
    assert main(["offsets", "--zk", zk_connect, "--topic", "t"]) == 0
    assert _out(capsys) == [
        "broker-partition  earliest  latest  bytes  status",
        "0-0               0         0       0",
        "0-1               0         51      51",
    ]
    assert main(["offsets", "--zk", zk_connect, "--topic", "t", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"topic": "t", "partitions": [
        {"broker": 0, "partition": 0, "earliest": 0, "latest": 0, "error": None},
        {"broker": 0, "partition": 1, "earliest": 0, "latest": 51, "error": None},
    ]}


def test_offsets_by_broker_list(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    produce_direct(broker, "t", 0, THREE[:2], "none")
    bl = f"0:{broker.host}:{broker.port}"
    assert main(["offsets", "--broker-list", bl, "--topic", "t"]) == 0
    assert _out(capsys)[1:] == ["0-0               0         34      34",
                                "0-1               0         0       0"]


def test_a_hung_broker_is_an_error_row_and_the_rest_is_shown(
    broker: EmbeddedBroker, zk_connect: str, hung_broker: int, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "t", 0, THREE, "none")
    broker.wait_for_topic("t")
    assert main(["offsets", "--zk", zk_connect, "--topic", "t", "--timeout-ms", "500"]) == 2
    lines = _out(capsys)
    assert lines[:3] == [
        "broker-partition  earliest  latest  bytes  status",
        "0-0               0         51      51",
        "0-1               0         0       0",
    ]
    assert lines[3].startswith("1-0               -         -       -      error: ")
    assert f"127.0.0.1:{hung_broker}: no " in lines[3] and "answer" in lines[3]
    assert len(lines) == 4


def test_topics(
    brokers: list[EmbeddedBroker], zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(brokers[0], "t", 0, THREE, "none")
    produce_direct(brokers[1], "t", 2, THREE, "none")
    produce_direct(brokers[1], "u", 0, THREE, "none")
    brokers[0].wait_for_topic("t")
    brokers[1].wait_for_topic("u")
    b0, b1 = (f"{b.host}:{b.port}" for b in brokers)
    assert main(["topics", "--zk", zk_connect]) == 0
    w = max(len(b0), len(b1))
    assert _out(capsys) == [
        "broker  " + "address".ljust(w).rstrip(),
        f"0       {b0}".rstrip(),
        f"1       {b1}".rstrip(),
        "",
        "topic  partitions  per broker (id:count)",
        "t      5           0:2 1:3",
        "u      3           1:3",
    ]
    assert main(["topics", "--zk", zk_connect, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["brokers"] == [{"id": 0, "address": b0}, {"id": 1, "address": b1}]
    assert doc["topics"][1] == {
        "topic": "u", "partitions": {"1": 3}, "not_live": [], "live_partitions": 3
    }


def test_lag_shows_every_committed_partition(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "t", 0, THREE, "none")
    broker.wait_for_topic("t")
    with Registry(zk_connect) as reg:  # 0-1: past the log end (0); broker 5 is not live
        reg.commit_group_offsets("g", "t", {(0, 0): 17, (0, 1): 60, (5, 0): 3}, creator="test")
    assert main(["lag", "--zk", zk_connect, "--group", "g", "--topic", "t"]) == 1
    assert _out(capsys)[:4] == [
        "group  topic  broker-partition  offset  latest  lag  owner  status",
        "g      t      0-0               17      51      34   -      ok",
        "g      t      0-1               60      0       -    -      past-log-end",
        "g      t      5-0               3       -       -    -      broker-not-live",
    ]
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets("g", "t", {(0, 1): 0}, creator="test")
    assert main(["lag", "--zk", zk_connect, "--group", "g", "--json"]) == 0  # all its topics
    rows = json.loads(capsys.readouterr().out)["partitions"]
    assert rows[1] == {"group": "g", "topic": "t", "broker": 0, "partition": 1, "offset": 0,
                       "earliest": 0, "latest": 0, "lag": 0, "status": "ok", "error": None,
                       "owner": None, "node": "0-1"}
    assert main(["lag", "--zk", zk_connect, "--group", "h", "--topic", "t"]) == 0
    assert [r.split()[-1] for r in _out(capsys)[1:3]] == ["not-committed", "not-committed"]


def test_unknown_topic_group_and_wrong_chroot(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["offsets", "--zk", zk_connect, "--topic", "nope"]) == 1
    assert capsys.readouterr().err == "kafka07: topic 'nope' is not registered in ZooKeeper\n"
    assert main(["lag", "--zk", zk_connect, "--group", "g"]) == 1
    assert capsys.readouterr().err == "kafka07: group 'g' has no committed offsets\n"
    server = zk_connect.rsplit("/", 1)[0]
    assert main(["topics", "--zk", server + "/kafka"]) == 2
    # the chroot diagnosis of the Spark paths; the registries it finds on this shared server
    # vary (tests/cluster/test_chroot_hints.py checks its full text on a ZooKeeper of its own)
    err = capsys.readouterr().err
    assert err.startswith(
        f"kafka07: ZooKeeper {server}/kafka has no node /kafka/brokers/ids: "
    ), err
    assert err.count("\n") == 1


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_produce_keyed_lines_then_consume(
    brokers: list[EmbeddedBroker], zk_connect: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    produce_direct(brokers[0], "k", 0, [b"x"], "none")  # registers k: 0:2 and, below, 1:3
    produce_direct(brokers[1], "k", 0, [b"y"], "none")
    brokers[1].wait_for_topic("k")
    # Java "a".hashCode() = 97, "b" = 98, "c" = 99; 5 partitions [0-0 0-1 1-0 1-1 1-2]:
    # 97 % 5 = 2 -> 1-0, 98 % 5 = 3 -> 1-1, 99 % 5 = 4 -> 1-2
    _stdin(monkeypatch, b"a:one\nb:two\nc:three\na:four\n")
    argv = ["produce", "--zk", zk_connect, "--topic", "k", "--key-separator", ":", "--codec",
            "gzip", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    end = brokers[1].log_end("k", 0)  # 11 (the "y") + one gzip wrapper
    assert doc == {"topic": "k", "messages": 4, "partitions": {"1-0": 2, "1-1": 1, "1-2": 1},
                   "bytes": doc["bytes"]}
    ends = [brokers[1].log_end("k", p) for p in range(3)]
    assert None not in ends
    assert doc["bytes"] == sum(e or 0 for e in ends) - 11
    assert main(["consume", "--zk", zk_connect, "--topic", "k", "--partition", "1-0"]) == 0
    out = capsys.readouterr()
    assert out.out == "y\none\nfour\n"
    assert out.err == "consumed 3 messages from 'k' (1 broker-partition read)\n"
    assert main(["consume", "--zk", zk_connect, "--topic", "k", "--json",
                 "--max-messages", "1", "--partition", "1-0", "--from", "11"]) == 0
    assert [json.loads(x) for x in _out(capsys)] == [
        {"topic": "k", "broker": 1, "partition": 0, "offset": 11, "next_offset": end,
         "inner_index": 0, "compression": "gzip", "value": "one"},
    ]


def test_produce_stops_at_a_line_without_a_key(
    broker: EmbeddedBroker, zk_connect: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _stdin(monkeypatch, b"a:1\nno key here\nb:2\n")
    assert main(["produce", "--zk", zk_connect, "--topic", "n", "--key-separator", ":"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "produced 1 message to 'n' (0-0: 1)",  # a new topic: partition 0 of every broker
        "kafka07: line 2 has no key separator ':'; the lines before it were produced, "
        "nothing after it",
    ]
    broker.wait_for_topic("n")  # the broker registers a new topic in ZooKeeper after its write
    assert main(["consume", "--zk", zk_connect, "--topic", "n"]) == 0
    assert capsys.readouterr().out == "1\n"


#: ``kafka07`` where pyspark cannot be imported: a finder first in ``sys.meta_path`` refuses it;
#: prints the Spark modules loaded by the end (none expected) to stderr's last line
_WITHOUT_PYSPARK = """
import sys

class NoPyspark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError(f"No module named {name!r} (hidden by the test)")
        return None

sys.meta_path.insert(0, NoPyspark())
from kafka_pyspark.cli import main
code = main(sys.argv[1:])
print(sorted(m for m in sys.modules if m.split(".")[0] == "pyspark"
             or m.startswith("kafka_pyspark._spark")), file=sys.stderr)
sys.exit(code)
"""


def test_produce_where_pyspark_is_not_installed(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PYSPARK, "produce", "--zk", zk_connect, "--topic", "np",
         "--json"],
        input=b"one\ntwo\nthree\n", capture_output=True, timeout=120, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr.decode()
    # a new topic: partition 0 of every broker; 3 uncompressed messages of 10 + 3, 3, 5 bytes
    assert json.loads(done.stdout) == {"topic": "np", "messages": 3, "bytes": 41,
                                       "partitions": {"0-0": 3}}
    assert done.stderr.decode().splitlines()[-1] == "[]"  # no pyspark, no kafka_pyspark._spark
    broker.wait_for_topic("np")
    assert broker.log_end("np", 0) == 41
    assert main(["consume", "--zk", zk_connect, "--topic", "np"]) == 0
    assert capsys.readouterr().out == "one\ntwo\nthree\n"


def test_consume_from_group_latest_and_dump_a_live_range(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "t", 0, THREE, "none")
    broker.wait_for_topic("t")
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets("g", "t", {(0, 0): 34}, creator="test")
    assert main(["consume", "--zk", zk_connect, "--topic", "t", "--from", "group",
                 "--group", "g"]) == 0
    assert capsys.readouterr().out == "ccccccc\n"
    assert main(["consume", "--zk", zk_connect, "--topic", "t", "--from", "latest"]) == 0
    assert capsys.readouterr().out == ""
    argv = ["dump", "--zk", zk_connect, "--topic", "t", "--partition", "0-0", "--start", "17"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        f"offset=17 next=34 inner=0 codec=none size=7 {FACTS[THREE[1]]}",
        f"offset=34 next=51 inner=0 codec=none size=7 {FACTS[THREE[2]]}",
    ]
    assert out.err == "t 0-0: 2 messages, end offset 51\n"
    assert main(["dump", "--zk", zk_connect, "--topic", "t", "--partition", "0-7"]) == 1
    assert capsys.readouterr().err == "kafka07: topic 't' has no partition 0-7\n"
    live = ["dump", "--zk", zk_connect, "--topic", "t", "--partition", "0-0"]
    assert main([*live, "--start", "52"]) == 1
    assert capsys.readouterr().err == "kafka07: --start 52 is outside t 0-0's log [0, 51]\n"
    assert main([*live, "--start", "17", "--end", "30"]) == 0  # messages starting before 30
    out = capsys.readouterr()
    assert out.out.splitlines() == [f"offset=17 next=34 inner=0 codec=none size=7 "
                                    f"{FACTS[THREE[1]]}"]
    assert out.err == "t 0-0: 1 message, end offset 34\n"
    assert main([*live, "--start", "5"]) == 1  # inside a message: what is there is no message
    out = capsys.readouterr()
    assert out.out == ""
    err = out.err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("kafka07: t 0-0: no message starts at --start 5: it is inside a "
                             "message, or the log is corrupt there (")


def test_consume_from_a_group_offset_outside_the_log_says_so(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "t", 0, THREE, "none")
    produce_direct(broker, "t", 1, THREE[:1], "none")
    broker.wait_for_topic("t")
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets("g", "t", {(0, 0): 52, (0, 1): 0}, creator="test")
    assert main(["consume", "--zk", zk_connect, "--topic", "t", "--from", "group",
                 "--group", "g"]) == 1
    out = capsys.readouterr()
    assert out.out == "aaaaaaa\n"  # 0-1 is still read
    assert out.err.splitlines() == [
        "kafka07: t 0-0: group 'g' committed offset 52, outside the log [0, 51]; not read",
        "consumed 1 message from 't' (1 broker-partition read, 1 failed)",
    ]
    kz = kazoo_client(zk_connect)
    try:
        kz.set("/consumers/g/offsets/t/0-0", b"abc")
    finally:
        kz.stop()
        kz.close()
    assert main(["consume", "--zk", zk_connect, "--topic", "t", "--from", "group",
                 "--group", "g"]) == 1
    out = capsys.readouterr()
    assert out.out == "aaaaaaa\n"
    assert out.err.splitlines() == [
        f"kafka07: t 0-0: ZooKeeper {zk_connect}: node /consumers/g/offsets/t/0-0: offset must "
        "be a non-negative decimal integer, got b'abc'; not read",
        "consumed 1 message from 't' (1 broker-partition read, 1 failed)",
    ]


def test_dump_a_segment_file_written_by_the_broker(
    broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "d", 0, THREE, "none")
    produce_direct(broker, "d", 0, [b"x", b"yy"], "gzip")
    (segment,) = broker.segment_files("d", 0)
    assert main(["dump", str(segment), "--values"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"offset=0 next=17 inner=0 codec=none size=7 {FACTS[THREE[0]]} " \
        "value=b'aaaaaaa'"
    assert lines[2] == f"offset=34 next=51 inner=0 codec=none size=7 {FACTS[THREE[2]]} " \
        "value=b'ccccccc'"
    assert lines[3].startswith("offset=51 ") and "inner=0 codec=gzip size=1 magic=1" in lines[3]
    assert lines[3].endswith("valid=true value=b'x'")
    assert "inner=1 codec=gzip size=2 magic=1 crc=" in lines[4]
    assert lines[4].endswith("valid=true value=b'yy'")
    assert len(lines) == 5


def test_consume_follow_waits_for_new_messages(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    produce_direct(broker, "f", 0, THREE, "none")
    broker.wait_for_topic("f")
    codes: list[int] = []
    argv = ["consume", "--zk", zk_connect, "--topic", "f", "--follow", "--poll-ms", "50",
            "--max-messages", "4"]
    follower = threading.Thread(target=lambda: codes.append(main(argv)), daemon=True)
    follower.start()
    produce_direct(broker, "f", 1, [b"later"], "snappy")  # before or after the first poll: all read
    follower.join(60)
    assert codes == [0]
    assert sorted(capsys.readouterr().out.splitlines()) == ["aaaaaaa", "bbbbbbb", "ccccccc",
                                                            "later"]


def test_consume_follow_stopped_by_ctrl_c_ends_with_its_summary(
    broker: EmbeddedBroker, zk_connect: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    sleep = time.sleep

    def ctrl_c_in_main_thread(seconds: float) -> None:
        if threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt
        sleep(seconds)

    produce_direct(broker, "f", 0, THREE, "none")
    broker.wait_for_topic("f")
    monkeypatch.setattr(time, "sleep", ctrl_c_in_main_thread)
    argv = ["consume", "--zk", zk_connect, "--topic", "f", "--partition", "0-0"]
    assert main([*argv, "--follow"]) == 0  # the documented way to stop --follow
    out = capsys.readouterr()
    assert out.out == "aaaaaaa\nbbbbbbb\nccccccc\n"
    assert out.err == ("kafka07: interrupted; to resume where it stopped: --start 0-0=51\n"
                       "consumed 3 messages from 'f' (1 broker-partition read)\n")


def test_consume_follow_goes_on_with_the_partitions_left_when_one_fails(
    broker: EmbeddedBroker, zk_connect: str, hung_broker: int,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    sleep = time.sleep

    def poll(seconds: float) -> None:  # the first poll finds a new message on 0-1
        if threading.current_thread() is threading.main_thread() and not polled:
            polled.append(seconds)
            produce_direct(broker, "t", 1, [b"later"], "none")
        sleep(seconds)

    polled: list[float] = []
    produce_direct(broker, "t", 1, THREE[:1], "none")
    broker.wait_for_topic("t")
    monkeypatch.setattr(time, "sleep", poll)
    assert main(["consume", "--zk", zk_connect, "--topic", "t", "--follow", "--poll-ms", "10",
                 "--max-messages", "2", "--timeout-ms", "500", "--partition", "0-1",
                 "--partition", "1-0"]) == 2
    out = capsys.readouterr()
    assert out.out == "aaaaaaa\nlater\n"
    assert out.err.splitlines()[-1] == \
        "consumed 2 messages from 't' (1 broker-partition read, 1 failed)"


def test_consume_reports_a_hung_broker_and_reads_the_rest(
    broker: EmbeddedBroker, zk_connect: str, hung_broker: int, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(broker, "t", 1, THREE[:1], "none")
    broker.wait_for_topic("t")
    assert main(["consume", "--zk", zk_connect, "--topic", "t", "--timeout-ms", "500"]) == 2
    out = capsys.readouterr()
    assert out.out == "aaaaaaa\n"
    line, last = out.err.splitlines()
    assert line.startswith("kafka07: t 1-0: ") and f"127.0.0.1:{hung_broker}" in line
    assert last == "consumed 1 message from 't' (2 broker-partitions read, 1 failed)"
