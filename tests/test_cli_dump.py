"""``kafka07 dump`` of segment files and the command's usage errors: no ZooKeeper needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _bytes import message, message_set

from kafka_pyspark.cli import main
from kafka_pyspark.cli.dump import DumpMessage, DumpStop, read_segment_file

THREE = message_set([b"a" * 7, b"b" * 7, b"c" * 7])  # 17 bytes each


def seg(tmp_path: Path, data: bytes, name: str = "00000000000000001000.kafka") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_dump_a_segment_file_with_its_base_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = seg(tmp_path, THREE)
    assert main(["dump", str(path), "--values"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "offset=1000 next=1017 inner=0 codec=none size=7 value=b'aaaaaaa'",
        "offset=1017 next=1034 inner=0 codec=none size=7 value=b'bbbbbbb'",
        "offset=1034 next=1051 inner=0 codec=none size=7 value=b'ccccccc'",
    ]
    assert out.err == f"{path}: end offset 1051\n"


def test_corruption_shows_the_valid_messages_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = bytearray(THREE + message(b"d" * 7))
    bad[17 + 16] ^= 0xFF  # last payload byte of the second message: its CRC no longer matches
    path = seg(tmp_path, bytes(bad), "00000000000000000000.kafka")
    assert main(["dump", str(path)]) == 1
    out = capsys.readouterr()
    assert out.out == "offset=0 next=17 inner=0 codec=none size=7\n"
    assert out.err.startswith(f"kafka07: {path}: corrupt at offset 17: ")
    assert "CRC" in out.err and "Traceback" not in out.err


def test_torn_tail_after_the_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = seg(tmp_path, THREE[:34] + b"\x00\x00\x00\x30\x01", "00000000000000000000.kafka")
    assert main(["dump", str(path), "--json"]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"offset": 0, "next_offset": 17, "inner_index": 0, "compression": "none", "size": 7},
        {"offset": 17, "next_offset": 34, "inner_index": 0, "compression": "none", "size": 7},
        {"stop": "torn-tail", "offset": 34, "error": "5 bytes at offset 34 are not a whole "
         "message (a torn tail: 0.7 recovery truncates it)"},
    ]


def test_json_values_are_text_or_base64(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = seg(tmp_path, message(b"hi") + message(b"\xff\x00"), "00000000000000000000.kafka")
    assert main(["dump", str(path), "--json", "--values"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["value"] == "hi" and "value_base64" not in lines[0]
    assert lines[1]["value_base64"] == "/wA=" and "value" not in lines[1]
    assert lines[2] == {"stop": "end", "offset": 24, "error": None}


def test_the_reader_seam_yields_messages_then_one_stop(tmp_path: Path) -> None:
    items = list(read_segment_file(seg(tmp_path, THREE[:17] + b"\x00\x00")))
    last = items[-1]
    assert isinstance(last, DumpStop)
    assert items == [
        DumpMessage(1000, 1017, 0, "none", b"a" * 7),
        DumpStop("torn-tail", 1017, last.error),
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["dump", "/no/such/file.kafka"], "cannot read segment file /no/such/file.kafka: "
         "no such file"),
        (["dump", "/"], "cannot read segment file /: is a directory"),
        (["dump"], "dump takes a segment FILE, or --topic and --partition"),
        (["dump", "x.kafka", "--topic", "t"], "dump takes a segment FILE, or --topic"),
        (["consume", "--zk", "h:1", "--broker-list", "0:h:1", "--topic", "t"],
         "argument --broker-list: not allowed with argument --zk"),
        (["offsets", "--topic", "t"], "one of the arguments --zk --broker-list is required"),
        (["lag", "--zk", "h:1", "--group", "g", "--timeout-ms", "0"],
         "argument --timeout-ms: '0' is not a positive integer"),
        (["nope"], "argument command: invalid choice: 'nope'"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unreachable_zookeeper_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["topics", "--zk", f"127.0.0.1:{port}", "--timeout-ms", "300"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"kafka07: ZooKeeper 127.0.0.1:{port}: could not connect within 300 ms "
        "(zk.connectiontimeout.ms): KazooTimeoutError: Connection time-out"
    ]
    assert not [r for r in caplog.records if r.name.startswith("kazoo")]


def test_lag_status_never_shows_a_negative_lag() -> None:
    from kafka_pyspark.cli.cluster_cmds import _classify

    assert _classify(None, 0, 51) == (None, "not-committed")
    assert _classify(17, 0, 51) == (34, "ok")
    assert _classify(51, 0, 51) == (0, "ok")
    assert _classify(60, 0, 51) == (None, "past-log-end")
    assert _classify(10, 17, 51) == (41, "before-log-start")
