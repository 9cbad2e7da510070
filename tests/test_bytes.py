"""Checks of the hand-written message builders (tests/_bytes.py) the broker tests send."""

from __future__ import annotations

import struct
import zlib

from _bytes import message, snappy_java_stream


def test_message_layout_golden() -> None:
    # magic 1, no codec, payload "value-0": 0000000d 01 00 <crc> 76616c75652d30
    m = message(b"value-0")
    assert m[:6] == bytes.fromhex("0000000d0100")
    assert m[6:10] == struct.pack(">I", zlib.crc32(b"value-0"))
    assert m[10:] == b"value-0"
    assert len(message(b"abc", magic=0)) == 4 + 1 + 4 + 3


def test_snappy_java_stream_header() -> None:
    s = snappy_java_stream(b"hello")
    assert s[:16] == bytes.fromhex("82534e415050590000000001 00000001".replace(" ", ""))
