"""The one-pass CRC check over many payloads (kafka_pyspark._messages.crc) against per-payload
zlib.crc32, and decoder paths that depend on it."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from kafka_pyspark._messages import decode_message_set, encode_message_set
from kafka_pyspark._messages.crc import verify_concatenated, zeros_crc
from kafka_pyspark.errors import CorruptMessageError


def payload_set(rnd: random.Random, sizes: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    payloads = [rnd.randbytes(n) for n in sizes]
    data = np.frombuffer(bytearray(b"".join(payloads)), dtype=np.uint8)
    lengths = np.array(sizes, dtype=np.int64)
    crcs = np.array([zlib.crc32(p) for p in payloads], dtype=np.uint32)
    return data, lengths, crcs


def test_zeros_crc_small_and_large() -> None:
    lengths = np.array([0, 1, 4095, 4096, 5000, 5000, 70000], dtype=np.int64)
    assert zeros_crc(lengths).tolist() == [zlib.crc32(bytes(int(n))) for n in lengths]


@pytest.mark.parametrize("seed", range(6))
def test_verify_matches_per_payload_crc(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(60):
        uniform = rnd.random() < 0.4
        count = rnd.randrange(1, 30)
        if uniform:
            size = rnd.choice([0, 1, 3, 4, 5, 7, 8, 200, 5000])
            sizes = [size] * count
        else:
            sizes = [rnd.choice([0, 1, 2, 3, 4, 9, 100, 4097]) for _ in range(count)]
        data, lengths, crcs = payload_set(rnd, sizes)
        hint = sizes[0] if uniform else None
        before = data.copy()
        assert verify_concatenated(data, lengths, crcs, hint)
        assert np.array_equal(data, before)  # restored
        bad = crcs.copy()
        bad[rnd.randrange(count)] ^= np.uint32(1 << rnd.randrange(32))
        assert not verify_concatenated(data, lengths, bad, hint)
        assert np.array_equal(data, before)
        if len(data):
            data[rnd.randrange(len(data))] ^= np.uint8(1 << rnd.randrange(8))
            assert not verify_concatenated(data, lengths, crcs, hint)


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 8, 200, 5000])
def test_uniform_sets_decode_and_detect_corruption(size: int) -> None:
    rnd = random.Random(size)
    values = [rnd.randbytes(size) for _ in range(50)]
    data = encode_message_set(values)
    assert decode_message_set(data).batch.column("value").to_pylist() == values
    if size:
        broken = bytearray(data)
        broken[(size + 10) * 37 + 10 + size - 1] ^= 0x40  # last payload byte of message 37
        with pytest.raises(CorruptMessageError) as info:
            decode_message_set(bytes(broken), 100)
        assert info.value.offset == 100 + (size + 10) * 37


def test_results_do_not_share_scratch_buffers() -> None:
    first = encode_message_set([b"first %d" % i for i in range(300)], compression="gzip")
    second = encode_message_set([b"second %d" % i for i in range(300)], compression="snappy")
    r1 = decode_message_set(first)
    r2 = decode_message_set(second)
    decode_message_set(first)
    assert r1.batch.column("value").to_pylist() == [b"first %d" % i for i in range(300)]
    assert r2.batch.column("value").to_pylist() == [b"second %d" % i for i in range(300)]
