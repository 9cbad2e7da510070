"""The fault suite's independent 0.7 log reader (log_reader.py) on hand-written bytes."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest
from log_reader import LogFormatError, count, payloads

# 0.7 layout by hand: LENGTH, MAGIC, [COMPRESSION], CRC32(payload), payload
HELLO_V0 = bytes.fromhex("0000000a" "00" "3610a686") + b"hello"  # crc32(b"hello")
ABC_V1 = bytes.fromhex("00000009" "01" "00" "352441c2") + b"abc"  # crc32(b"abc")
EMPTY_V1 = bytes.fromhex("00000006" "01" "00" "00000000")  # crc32(b"") == 0


def wrapper(inner: bytes, codec: int = 1) -> bytes:
    payload = gzip.compress(inner, mtime=0) if codec == 1 else inner
    head = (6 + len(payload)).to_bytes(4, "big") + bytes([1, codec])
    return head + zlib.crc32(payload).to_bytes(4, "big") + payload


def test_plain_messages_both_magics() -> None:
    assert list(payloads(HELLO_V0 + ABC_V1 + EMPTY_V1)) == [b"hello", b"abc", b""]


def test_gzip_wrapper_opened_in_order() -> None:
    data = ABC_V1 + wrapper(HELLO_V0 + EMPTY_V1 + ABC_V1) + HELLO_V0
    assert list(payloads(data)) == [b"abc", b"hello", b"", b"abc", b"hello"]


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (ABC_V1[:-1] + b"x", "offset 0: checksum mismatch"),
        (ABC_V1 + ABC_V1[:3], "3 trailing byte(s) at offset 13"),
        (ABC_V1 + ABC_V1[:-1], "offset 13 has length 9, 8 byte(s) left"),
        (bytes.fromhex("0000000902") + ABC_V1[5:], "magic 2"),
        (wrapper(ABC_V1, codec=2), "compression 2"),
    ],
)
def test_malformed_logs_named(data: bytes, text: str) -> None:
    with pytest.raises(LogFormatError, match=text.replace("(", r"\(").replace(")", r"\)")):
        list(payloads(data))


def test_count_reads_segment_files_in_offset_order(tmp_path: Path) -> None:
    part = tmp_path / "b0" / "t-1"
    part.mkdir(parents=True)
    first = ABC_V1 + HELLO_V0
    (part / f"{0:020d}.kafka").write_bytes(first)
    (part / f"{len(first):020d}.kafka").write_bytes(wrapper(ABC_V1))
    (tmp_path / "b0" / "t2-0").mkdir()  # another topic: not read
    (tmp_path / "b0" / "t2-0" / f"{0:020d}.kafka").write_bytes(HELLO_V0)
    assert count([tmp_path / "b0"], "t") == {b"abc": 2, b"hello": 1}
