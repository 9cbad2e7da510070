"""``kafka07 dump`` of segment files and the command's usage errors: no ZooKeeper needed."""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bytes import gzip_wrapper, message, message_set
from _cluster import silent_peer

from kafka_pyspark._shared import defaults
from kafka_pyspark.cli import main
from kafka_pyspark.cli._dump import DumpMessage, DumpStop, read_segment_file

THREE = message_set([b"a" * 7, b"b" * 7, b"c" * 7])  # 17 bytes each
# the CRC-32 of each payload, as 0.7's DumpLogSegments prints it (unsigned)
CRC = {c: zlib.crc32(c * 7) for c in (b"a", b"b", b"c", b"d")}


def facts(c: bytes, valid: str = "true") -> str:
    return f"magic=1 crc={CRC[c]} valid={valid}"


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
        f"offset=1000 next=1017 inner=0 codec=none size=7 {facts(b'a')} value=b'aaaaaaa'",
        f"offset=1017 next=1034 inner=0 codec=none size=7 {facts(b'b')} value=b'bbbbbbb'",
        f"offset=1034 next=1051 inner=0 codec=none size=7 {facts(b'c')} value=b'ccccccc'",
    ]
    assert out.err == f"{path}: 3 messages, end offset 1051\n"


def test_a_bad_crc_is_shown_invalid_and_the_dump_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = bytearray(THREE + message(b"d" * 7))
    bad[17 + 16] ^= 0xFF  # last payload byte of the second message: its CRC no longer matches
    path = seg(tmp_path, bytes(bad), "00000000000000000000.kafka")
    assert main(["dump", str(path)]) == 1
    out = capsys.readouterr()
    computed = zlib.crc32(b"b" * 6 + bytes([ord("b") ^ 0xFF]))
    assert out.out.splitlines() == [
        f"offset=0 next=17 inner=0 codec=none size=7 {facts(b'a')}",
        f"offset=17 next=34 inner=0 codec=none size=7 {facts(b'b', 'false')} error='CRC "
        f"mismatch: stored {CRC[b'b']}, computed {computed} over the payload'",
        f"offset=34 next=51 inner=0 codec=none size=7 {facts(b'c')}",
        f"offset=51 next=68 inner=0 codec=none size=7 {facts(b'd')}",
    ]
    assert out.err == f"{path}: 4 messages (1 not valid), end offset 68\n"


def test_a_framing_fault_stops_after_the_messages_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = bytearray(THREE)
    bad[17 + 4] = 7  # the second message's MAGIC
    path = seg(tmp_path, bytes(bad), "00000000000000000000.kafka")
    assert main(["dump", str(path), "--no-verify"]) == 1
    out = capsys.readouterr()
    assert out.out == "offset=0 next=17 inner=0 codec=none size=7 magic=1 crc=" \
        f"{CRC[b'a']} valid=unchecked\n"
    err = out.err.splitlines()
    assert err[0] == f"{path}: 1 message"
    assert err[1].startswith(f"kafka07: {path}: corrupt at offset 17: ") and "MAGIC 7" in err[1]


def test_a_gzip_wrapper_shows_its_messages_with_its_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrapper = gzip_wrapper(message_set([b"x", b"yy"]))
    path = seg(tmp_path, wrapper, "00000000000000000000.kafka")
    assert main(["dump", str(path), "--json", "--values"]) == 0
    crc = zlib.crc32(wrapper[10:])  # of the compressed payload, after the 10-byte header
    n = len(wrapper)
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [
        {"offset": 0, "next_offset": n, "inner_index": 0, "compression": "gzip", "size": 1,
         "magic": 1, "crc": crc, "valid": True, "value": "x"},
        {"offset": 0, "next_offset": n, "inner_index": 1, "compression": "gzip", "size": 2,
         "magic": 1, "crc": crc, "valid": True, "value": "yy"},
        {"stop": "end", "offset": n, "error": None},
    ]


def test_many_files_and_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    (logs / "t-0").mkdir(parents=True)
    (logs / "t-1").mkdir()
    a = seg(logs / "t-0", THREE[:17], "00000000000000000000.kafka")
    b = seg(logs / "t-0", THREE[17:34], "00000000000000000017.kafka")
    c = seg(logs / "t-1", THREE[34:], "00000000000000000000.kafka")
    seg(logs / "t-1", b"not a segment", "00000000000000000000.index")  # not read
    assert main(["dump", str(logs), "--json"]) == 0  # a whole log directory
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(d["file"], d.get("offset"), d.get("stop")) for d in lines] == [
        (str(a), 0, None), (str(a), 17, "end"), (str(b), 17, None), (str(b), 34, "end"),
        (str(c), 0, None), (str(c), 17, "end"),
    ]
    assert main(["dump", str(c), str(logs / "t-0")]) == 0  # a file and a partition directory
    out = capsys.readouterr()
    assert [x for x in out.out.splitlines() if not x.startswith("offset=")] == [
        f"Dumping {c}", f"Dumping {a}", f"Dumping {b}"]
    assert out.err.splitlines() == [
        f"{c}: 1 message, end offset 17", f"{a}: 1 message, end offset 17",
        f"{b}: 1 message, end offset 34", "3 files: 3 messages"]
    assert main(["dump", str(logs), "--start", "17", "--max-messages", "1"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        f"Dumping {a}", f"Dumping {b}",
        f"offset=17 next=34 inner=0 codec=none size=7 {facts(b'b')}",
    ]
    assert out.err.splitlines() == [
        f"{a}: 0 messages, end offset 17", f"{b}: 1 message, end offset 34",
        "2 of 3 files: 1 message"]


def test_what_is_not_a_file_says_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.kafka"
    os.mkfifo(fifo)
    (tmp_path / "empty").mkdir()
    good = seg(tmp_path, THREE[:17])
    argv = ["dump", str(fifo), "/dev/zero", str(tmp_path / "nope.kafka"), str(good),
            str(tmp_path / "empty")]
    assert main(argv) == 2  # the others are still dumped
    out = capsys.readouterr()
    assert out.out.startswith("offset=1000 next=1017")
    assert out.err.splitlines() == [
        f"kafka07: cannot read segment file {fifo}: is a FIFO (named pipe), not a segment file",
        "kafka07: cannot read segment file /dev/zero: is a character device, not a segment file",
        f"kafka07: cannot read segment file {tmp_path / 'nope.kafka'}: no such file or directory",
        f"kafka07: no segment files (.kafka, .log) in directory {tmp_path / 'empty'} or its "
        "subdirectories",
        f"{good}: 1 message, end offset 1017",
    ]


def test_torn_tail_after_the_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = seg(tmp_path, THREE[:34] + b"\x00\x00\x00\x30\x01", "00000000000000000000.kafka")
    assert main(["dump", str(path), "--json"]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"offset": 0, "next_offset": 17, "inner_index": 0, "compression": "none", "size": 7,
         "magic": 1, "crc": CRC[b"a"], "valid": True},
        {"offset": 17, "next_offset": 34, "inner_index": 0, "compression": "none", "size": 7,
         "magic": 1, "crc": CRC[b"b"], "valid": True},
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
        DumpMessage(1000, 1017, 0, "none", b"a" * 7, magic=1, crc=CRC[b"a"], valid=True),
        DumpStop("torn-tail", 1017, last.error),
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["dump", "/no/such/file.kafka"], "cannot read segment file /no/such/file.kafka: "
         "no such file or directory"),
        (["dump"], "dump takes segment FILEs or directories, or --topic and --partition"),
        (["dump", "x.kafka", "--topic", "t"], "dump takes segment FILEs or directories, or"),
        (["dump", "x.kafka", "--start", "-5"],
         "argument --start: '-5' is negative (byte offsets start at 0)"),
        (["dump", "--zk", "h:1", "--topic", "t", "--partition", "0-0", "--start", "10",
          "--end", "5"], "--end 5 must be greater than --start 10"),
        (["topics", "--zk", "127.0.0.1:2181/a/../b"],
         "kafka07: --zk: chroot '/a/../b' in '127.0.0.1:2181/a/../b' has a '.' or '..' "
         "component"),
        (["topics", "--zk", "a" * 64 + ".example:2181"], "kafka07: --zk: entry '" + "a" * 64
         + ".example:2181' of '" + "a" * 64 + ".example:2181': host '" + "a" * 64 + ".example' "
         "is not a valid host name (a dot-separated label is empty or longer than 63 "
         "characters)"),
        (["offsets", "--broker-list", "0:" + "b" * 64 + ":9092", "--topic", "t"],
         "kafka07: --broker-list: entry '0:" + "b" * 64 + ":9092': host '" + "b" * 64
         + "' is not a valid host name"),
        (["lag", "--zk", "ops:Pw-not-shown@127.0.0.1:2181", "--group", "g"],
         "kafka07: --zk: holds '@': user info (user:password@host) is not taken there, nor an "
         "'@' in a chroot (a password holding '/' would pass for one), and the value is not "
         "shown; give ZooKeeper credentials in options zk.auth.user + "
         "zk.auth.password; kafka07: --zk-auth-file or KAFKA07_ZK_AUTH\n"),
        (["consume", "--zk", "h:1", "--broker-list", "0:h:1", "--topic", "t"],
         "argument --broker-list: not allowed with argument --zk"),
        (["offsets", "--topic", "t"], "one of the arguments --zk --broker-list is required"),
        (["lag", "--zk", "127.0.0.1:1", "--group", "a/b"],
         "kafka07: --group: 'a/b' is not a legal group id"),
        # outside Unicode's BMP (ZooKeeper refuses it): refused before any request, whatever
        # the command (consume would reach ZooKeeper first)
        *[([*argv, "--zk", "127.0.0.1:1", "--group", "g\U0001f600"],
           "kafka07: --group: 'g\U0001f600' is not a legal group id (a ZooKeeper node name: "
           "not empty, '.' or '..', no '/', control characters or characters outside Unicode's "
           "Basic Multilingual Plane such as emoji)")
          for argv in (["lag"], ["consume", "--topic", "t", "--from", "group"],
                       ["group-offsets", "--topic", "t", "--to", "earliest"])],
        (["lag", "--zk", "h:1", "--group", "g", "--timeout-ms", "0"],
         "argument --timeout-ms: '0' is not a positive integer"),
        (["nope"], "argument COMMAND: invalid choice: 'nope'"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "Pw-not-shown" not in err


def test_version_and_help_on_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from kafka_pyspark import __version__
    from kafka_pyspark._messages import walk
    from kafka_pyspark.cli import build_parser

    assert main(["--version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"kafka07 (kafka_pyspark) {__version__}"
    assert out[2] == ("decode none:              compiled (_messages._kernel)" if walk.kernel
                      else "decode none:              pure Python")
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [
        f"{name} {action.dest}" for name, p in sub.choices.items() for action in p._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert missing == []
    assert all(choice.help for choice in sub._choices_actions)
    assert "exit codes:" in parser.format_help()


def test_version_names_the_pure_twins_when_they_are_forced() -> None:
    import subprocess

    from kafka_pyspark import __version__
    from kafka_pyspark._messages import compression, crc

    env = {**os.environ, "KAFKA_PYSPARK_PURE": "1"}
    done = subprocess.run([sys.executable, "-m", "kafka_pyspark.cli", "--version"], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    library = {"isal": "ISA-L (python-isal)", "zlib": "zlib"}
    assert done.stdout.splitlines() == [
        f"kafka07 (kafka_pyspark) {__version__}",
        "engine:                   pure Python (KAFKA_PYSPARK_PURE is set)",
        "decode none:              pure Python",
        f"decode gzip:              {library[compression.GZIP_ENGINE]} inflate, pure Python walk",
        f"decode snappy:            pure Python walk, {compression.SNAPPY_ENGINE}",
        f"CRC-32:                   {library[crc.CRC32_ENGINE]}",
        f"encode:                   pure Python (gzip: zlib, snappy: {compression.SNAPPY_ENGINE})",
        "record batches v2 (.log): pure Python",
    ]


def test_progress_only_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from kafka_pyspark.cli import _output as output

    path = seg(tmp_path, THREE)
    monkeypatch.setattr(output, "PROGRESS_EVERY_S", 0.0)
    assert main(["dump", str(path)]) == 0
    assert "\r" not in capsys.readouterr().err  # stderr is not a terminal here
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["dump", str(path)]) == 0
    err = capsys.readouterr().err
    assert "\r\x1b[Kdump: 3 messages, 21 bytes" in err
    assert err.endswith(f"\r\x1b[K{path}: 3 messages, end offset 1051\n")  # erased first


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
        "(--timeout-ms): KazooTimeoutError: Connection time-out"
    ]
    assert not [r for r in caplog.records if r.name.startswith("kazoo")]


def test_timeout_ms_bounds_the_connect_to_a_silent_zookeeper(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A ZooKeeper that accepts the connection and never answers is given up after
    --timeout-ms, though the session timeout is the default (60 times longer)."""
    with silent_peer() as port:
        started = time.monotonic()
        assert main(["topics", "--zk", f"127.0.0.1:{port}", "--timeout-ms", "100"]) == 2
        elapsed = time.monotonic() - started
    assert capsys.readouterr().err.splitlines() == [
        f"kafka07: ZooKeeper 127.0.0.1:{port}: could not connect within 100 ms "
        "(--timeout-ms): KazooTimeoutError: Connection time-out"
    ]
    assert elapsed < defaults.ZK_SESSION_TIMEOUT_MS / 1000 / 2


def test_ctrl_c_is_exit_130_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_pyspark.cli import _dump as dump

    def interrupted(path: object, *, verify_crc: bool = True) -> Iterator[object]:
        raise KeyboardInterrupt

    monkeypatch.setattr(dump, "read_segment_file", interrupted)
    assert main(["dump", str(seg(tmp_path, THREE))]) == 130
    assert capsys.readouterr().err == "kafka07: interrupted\n"


def test_stdout_closed_by_its_reader_is_no_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kafka07 dump FILE | head -1``: the pipe closes after the first line."""
    import io
    import sys

    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    path = seg(tmp_path, THREE)
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["dump", str(path), str(path)]) == 0
    assert main(["dump", str(path), "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_lag_status_never_shows_a_negative_lag() -> None:
    from kafka_pyspark._admin.lag import _classify

    assert _classify(None, 0, 51) == (None, "not-committed")
    assert _classify(17, 0, 51) == (34, "ok")
    assert _classify(51, 0, 51) == (0, "ok")
    assert _classify(60, 0, 51) == (None, "past-log-end")
    assert _classify(10, 17, 51) == (41, "before-log-start")


def test_the_manual_is_installed_and_named_by_help(capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_pyspark.cli import MANUAL

    tomllib = pytest.importorskip("tomllib")

    repo = Path(__file__).resolve().parents[2]
    assert MANUAL.read_text() == (repo / "docs" / "cli.md").read_text()
    package_data = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["kafka_pyspark"]
    assert "cli/cli.md" in package_data
    assert main(["--help"]) == 0
    assert f"The manual (docs/cli.md) is installed at {MANUAL}" in capsys.readouterr().out


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="Linux /proc")
def test_a_file_that_fails_to_read_is_reported_and_the_others_dumped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = seg(tmp_path, THREE[:17])
    assert main(["dump", "/proc/self/mem", str(good)]) == 2  # a regular file; reading: EIO
    out = capsys.readouterr()
    assert out.out.splitlines()[-1].startswith("offset=1000 next=1017")
    assert out.err.splitlines() == [
        "kafka07: cannot read segment file /proc/self/mem: Input/output error",
        f"{good}: 1 message, end offset 1017",
        "2 files: 1 message",
    ]


def test_messages_name_the_arguments_not_the_connector_options() -> None:
    """Every message a command prints goes through one rewrite (cli/_output.flag_words): an
    option the command set from an argument is named as that argument."""
    from kafka_pyspark.cli._output import flag_words

    assert flag_words("option 'zk.connect': holds '@': the value is not shown") == \
        "--zk: holds '@': the value is not shown"
    assert flag_words("option 'batch.size': must be >= 1, got 0") == \
        "--batch-size: must be >= 1, got 0"
    assert flag_words("ZooKeeper h:1: could not connect within 300 ms "
                      "(zk.connectiontimeout.ms): KazooTimeoutError") == \
        "ZooKeeper h:1: could not connect within 300 ms (--timeout-ms): KazooTimeoutError"
    assert flag_words("ZooKeeper h:1 has no node /brokers/ids: a Kafka registry is under "
                      "/kafka (3 brokers registered): use zk.connect 'h:1/kafka'") == (
        "ZooKeeper h:1 has no node /brokers/ids: a Kafka registry is under /kafka (3 brokers "
        "registered): use --zk 'h:1/kafka'")
    # names that are a value, part of a path or of a longer name stay as they are
    for text in ("topic 'zk.connect' is not registered", "cannot read /tmp/zk.connect",
                 "option 'max.message.size': too large", "the topic t; group.idle"):
        assert flag_words(text) == text
