"""The embedded broker's storage seen over sockets: segments, rolling, recovery, topic names.

No ZooKeeper here (see test_broker_zookeeper.py).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _broker_raw import THREE, Conn, fetch_frame
from _bytes import message

from kafka_pyspark import _wire as wire
from kafka_pyspark.testing._log import LogStorageError
from kafka_pyspark.testing.broker import EmbeddedBroker

M = THREE[:17]


@pytest.fixture
def small(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """Segments roll once over 40 bytes."""
    with EmbeddedBroker(log_dir=tmp_path / "logs", num_partitions=2, log_file_size=40) as b:
        yield b


def produce_each(
    b: EmbeddedBroker, sets: list[bytes], topic: str = "t", partition: int = 0
) -> None:
    with Conn(b) as c:
        for s in sets:
            c.produce(topic, partition, s)
        c.barrier()


def test_layout_on_disk(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path, num_partitions=3) as b:
        produce_each(b, [THREE], "dogs", 0)
        produce_each(b, [M], "dogs", 2)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dogs-0", "dogs-2"]
        assert b.segment_files("dogs", 0) == [tmp_path / "dogs-0" / "00000000000000000000.kafka"]
        assert (tmp_path / "dogs-0" / "00000000000000000000.kafka").read_bytes() == THREE
        assert b.segment_files("dogs", 1) == []
        assert b.topics() == ["dogs"]


def test_segments_roll_and_fetch_stays_in_one_segment(small: EmbeddedBroker) -> None:
    produce_each(small, [M] * 7)
    # sizes before each append 0,17,34,51>40 roll at 51; 17,34,51>40 roll at 102
    files = small.segment_files("t", 0)
    assert [f.name for f in files] == [
        "00000000000000000000.kafka",
        "00000000000000000051.kafka",
        "00000000000000000102.kafka",
    ]
    assert [f.stat().st_size for f in files] == [51, 51, 17]
    with Conn(small) as c:
        assert c.fetch("t", 0, 0, 10_000) == fetch_frame(0, M * 3)
        assert c.fetch("t", 0, 34, 10_000) == fetch_frame(0, M)  # up to the segment's end
        assert c.fetch("t", 0, 51, 10_000) == fetch_frame(0, M * 3)
        assert c.fetch("t", 0, 102, 10_000) == fetch_frame(0, M)
        assert c.fetch("t", 0, 119, 10_000) == fetch_frame(0)
        assert c.fetch("t", 0, 120, 10_000) == fetch_frame(1)


def test_message_set_never_split_across_segments(small: EmbeddedBroker) -> None:
    produce_each(small, [THREE, THREE, THREE])
    assert [f.stat().st_size for f in small.segment_files("t", 0)] == [51, 51, 51]


def test_offsets_after_rolling(small: EmbeddedBroker) -> None:
    produce_each(small, [M] * 7)
    now_ms = int(time.time() * 1000)
    with Conn(small) as c:
        assert c.offsets("t", 0, -1, 100) == [119, 102, 51, 0]
        assert c.offsets("t", 0, -1, 2) == [119, 102]
        assert c.offsets("t", 0, -2, 100) == [0]
        assert c.offsets("t", 0, now_ms + 60_000, 100) == [119, 102, 51, 0]
        # segment start times: files' modification times (set here to known values)
        for f, t in zip(small.segment_files("t", 0), (1_000, 2_000, 3_000), strict=True):
            os.utime(f, (t, t))
        assert c.offsets("t", 0, 999_999, 100) == []
        assert c.offsets("t", 0, 1_500_000, 100) == [0]
        assert c.offsets("t", 0, 2_500_000, 100) == [51, 0]
        assert c.offsets("t", 0, 3_000_000, 100) == [102, 51, 0]
        assert c.offsets("t", 0, 3_000_000, 1) == [102]


def test_restart_keeps_port_and_data(small: EmbeddedBroker) -> None:
    produce_each(small, [M] * 4)
    port = small.port
    small.restart()
    assert small.port == port and small.running
    with Conn(small) as c:
        assert c.offsets("t", 0, -1, 100) == [68, 51, 0]
        assert c.fetch("t", 0, 51, 100) == fetch_frame(0, M)
        c.produce("t", 0, M)
        assert c.offsets("t", 0, -1, 100) == [85, 51, 0]


@pytest.mark.parametrize(
    ("damage", "end"),
    [
        (lambda p: p.open("ab").write(b"\x00\x00\x00\x30garbage"), 68),  # torn append
        (lambda p: os.truncate(p, p.stat().st_size - 3), 51),  # torn last message
        (lambda p: p.open("ab").write(b"\x00" * 100), 68),  # zero-filled block
        (lambda p: p.open("ab").write(b"\x00\x00\x00\x0d\x01\x00" + b"\xde\xad" * 5 + b"!"), 68),
    ],
)
def test_recovery_of_a_torn_tail_after_restart(
    small: EmbeddedBroker, damage: Callable[[Path], object], end: int
) -> None:
    produce_each(small, [M] * 4)  # segments 0 (51 bytes) and 51 (17 bytes)
    small.stop()
    last = small.segment_files("t", 0)[-1]
    assert last.name == "00000000000000000051.kafka"
    damage(last)
    small.start()
    assert last.stat().st_size == end - 51
    with Conn(small) as c:
        assert c.offsets("t", 0, -1, 100) == ([end, 51, 0] if end > 51 else [51, 0])
        assert c.fetch("t", 0, end, 100) == fetch_frame(0)
        assert c.fetch("t", 0, 51, 100) == fetch_frame(0, M * ((end - 51) // 17))
        c.produce("t", 0, M)  # appends continue at the recovered end
        assert c.fetch("t", 0, end, 100) == fetch_frame(0, M)


def test_restart_fails_on_segments_that_do_not_line_up(small: EmbeddedBroker) -> None:
    produce_each(small, [M] * 4)
    small.stop()
    first = small.segment_files("t", 0)[0]
    os.truncate(first, 50)
    with pytest.raises(LogStorageError):
        small.start()
    assert not small.running


# --- topic names and partition counts -------------------------------------------------------


def raw_produce(topic: bytes, partition: int, messages: bytes) -> bytes:
    body = (
        struct.pack(">hh", wire.PRODUCE, len(topic))
        + topic
        + struct.pack(">ii", partition, len(messages))
        + messages
    )
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    "topic",
    [b"", b".", b"..", b"../escape", b"a/b", b"a\\b", b"nul\x00", b"tab\tx", b"x" * 256,
     "caf\u00e9".encode(), b"\xff\xfe"],
)
def test_unsafe_topic_names_refused(tmp_path: Path, topic: bytes) -> None:
    logs = tmp_path / "logs"
    with EmbeddedBroker(log_dir=logs) as b, Conn(b) as c:
        c.send(raw_produce(topic, 0, M))
        assert c.closed_by_peer()
        assert list(logs.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]


def test_odd_but_safe_topic_names_work(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        for topic in ("with-dash-0", "dots.and_underscores", "x" * 240, "sp ace", "..."):
            produce_each(b, [M], topic)
            with Conn(b) as c:
                assert c.fetch(topic, 0, 0, 100) == fetch_frame(0, M)
        assert (tmp_path / "with-dash-0-0").is_dir()


def test_topic_name_too_long_for_the_filesystem_closes(tmp_path: Path) -> None:
    # validate_topic_name refuses over 249 characters: "<topic>-<partition>" must fit a name
    with EmbeddedBroker(log_dir=tmp_path) as b:
        with Conn(b) as c:
            c.produce("x" * 255, 0, M)
            assert c.closed_by_peer()
        assert b.topics() == []
        produce_each(b, [M], "y")
        assert b.topics() == ["y"]


def test_topic_partitions_override(tmp_path: Path) -> None:
    with EmbeddedBroker(
        log_dir=tmp_path, num_partitions=2, topic_partitions={"big": 5}
    ) as b, Conn(b) as c:
        assert b.partitions_for("big") == 5 and b.partitions_for("other") == 2
        c.produce("big", 4, M)
        assert c.fetch("big", 4, 0, 100) == fetch_frame(0, M)
        assert c.fetch("big", 5, 0, 100) == fetch_frame(3)
        assert c.fetch("other", 2, 0, 100) == fetch_frame(3)
        c.produce("big", 5, M)
        assert c.closed_by_peer()


def test_request_size_bound(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path, max_request_size=200) as b:
        with Conn(b) as c:
            c.produce("t", 0, M * 10)  # 170 bytes of messages + 17 of header = 187 <= 200
            c.barrier()
        with Conn(b) as c:
            c.produce("t", 0, M * 12)  # 221 > 200
            assert c.closed_by_peer()
        with Conn(b) as c:  # a length announced past the bound is refused before the body
            c.send(struct.pack(">i", 1 << 30))
            assert c.closed_by_peer()
        with Conn(b) as c:
            c.send(struct.pack(">i", 0))
            assert c.closed_by_peer()
        assert b.log_end("t", 0) == 170


def test_malformed_request_closes(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        fetch = wire.encode_request(wire.FetchRequest("t", 0, 0, 100))
        with Conn(b) as c:  # frame shorter than a FETCH needs
            c.send(struct.pack(">i", len(fetch) - 6) + fetch[4:-2])
            assert c.closed_by_peer()
        with Conn(b) as c:  # topic length past the frame
            c.send(struct.pack(">ihh", 4, wire.FETCH, 50))
            assert c.closed_by_peer()


def test_big_messages_go_through(tmp_path: Path) -> None:
    payload = os.urandom(3 << 20)
    big = message(payload)
    with EmbeddedBroker(log_dir=tmp_path, max_message_size=4 << 20) as b, Conn(b) as c:
        c.produce("t", 0, big)
        assert c.fetch("t", 0, 0, len(big) + 100) == fetch_frame(0, big)


def test_fetch_without_sendfile(small: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    produce_each(small, [THREE])
    monkeypatch.delattr(os, "sendfile")
    with Conn(small) as c:
        assert c.fetch("t", 0, 0, 100) == fetch_frame(0, THREE)
        assert c.fetch("t", 0, 5, 7) == fetch_frame(0, THREE[5:12])


def test_fetch_uses_sendfile(small: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    produce_each(small, [THREE])
    calls: list[tuple[int, int]] = []
    real = os.sendfile

    def spy(out: int, fd: int, offset: int, count: int) -> int:
        calls.append((offset, count))
        return real(out, fd, offset, count)

    monkeypatch.setattr(os, "sendfile", spy)
    with Conn(small) as c:
        assert c.fetch("t", 0, 5, 20) == fetch_frame(0, THREE[5:25])
    assert calls == [(5, 20)]
