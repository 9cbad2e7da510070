"""CRC-32 and gzip engines: python-isal when it imports, stdlib zlib otherwise. Both must give
the same bytes and the same decoded rows; the fallback is run in a subprocess where ``isal``
cannot be imported."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from kafka_pyspark._messages import compression, crc, decode_message_set, encode_message_set
from kafka_pyspark.errors import DecompressedSizeError

ROOT = Path(__file__).resolve().parents[2]

# Encodes and decodes a fixed workload, prints what came out (hex digests, rows, errors)
WORKLOAD = r"""
import hashlib, json, random, sys, zlib
from _bytes import message
import numpy as np
import pyarrow as pa
from kafka_pyspark.errors import MessageError
from kafka_pyspark._messages import (
    compression, crc, decode_message_set, encode_message_set, encode_message_sets_arrow,
)

rnd = random.Random(11)
values = [rnd.randbytes(rnd.randrange(0, 600)) for _ in range(700)]
out = {"crc_engine": crc.CRC32_ENGINE, "gzip_engine": compression.GZIP_ENGINE}
out["crc"] = [crc.crc32(v) for v in values[:50]] + [crc.crc32(b"".join(values), 12345)]
out["crc_many"] = crc.crc32_many(values, 200).tolist()
digest = lambda b: hashlib.sha256(b).hexdigest()
for codec in ("none", "gzip", "snappy"):
    data = encode_message_set(values, compression=codec)
    sets = encode_message_sets_arrow(pa.array(values), [0, 100, 100, 450, 700], compression=codec)
    out["enc_" + codec] = [digest(data)] + [digest(s) for s in sets]
    rows = decode_message_set(data, 5).batch.to_pydict()
    out["dec_" + codec] = digest(json.dumps({k: [x.hex() if isinstance(x, bytes) else x
                                                 for x in v] for k, v in rows.items()}).encode())
    broken = bytearray(data)
    broken[len(broken) // 2] ^= 0x10
    try:
        decode_message_set(bytes(broken), 5)
        out["err_" + codec] = None
    except MessageError as e:
        out["err_" + codec] = [type(e).__name__, e.offset]
bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
bomb = bomb.compress(b"\0" * (32 << 20)) + bomb.flush()
wrapper = message(bomb, codec=1)  # a gzip wrapper (tests/_bytes.py)
try:
    decode_message_set(wrapper, max_decompressed_size=1 << 20)
except MessageError as e:
    out["bomb"] = [type(e).__name__, e.offset]
print(json.dumps(out))
"""

BLOCK_ISAL = "import sys; sys.modules['isal'] = None\n"


def run_workload(block_isal: bool) -> dict[str, object]:
    code = (BLOCK_ISAL if block_isal else "") + WORKLOAD
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_fallback_to_zlib_gives_identical_results() -> None:
    with_isal = run_workload(block_isal=False)
    without = run_workload(block_isal=True)
    assert (without["crc_engine"], without["gzip_engine"]) == ("zlib", "zlib")
    assert (with_isal["crc_engine"], with_isal["gzip_engine"]) == (
        crc.CRC32_ENGINE, compression.GZIP_ENGINE
    )
    for key in with_isal:
        if not key.endswith("_engine"):
            assert with_isal[key] == without[key], key
    assert with_isal["bomb"] == ["DecompressedSizeError", 0]


def test_engines_in_use() -> None:
    try:
        import isal  # noqa: F401
    except ImportError:  # pragma: no cover
        pytest.skip("python-isal is not installed")
    assert crc.CRC32_ENGINE == "isal"
    assert compression.GZIP_ENGINE == "isal"


def test_crc32_matches_zlib() -> None:
    rnd = random.Random(2)
    for size in (0, 1, 3, 15, 16, 63, 64, 200, 383, 384, 4095, 70_000, 1 << 20):
        data = rnd.randbytes(size)
        for start in (0, 1, 0xFFFFFFFF, rnd.getrandbits(32)):
            assert crc.crc32(data, start) == zlib.crc32(data, start)
        assert crc.crc32(memoryview(data)) == zlib.crc32(data)
        assert crc.crc32(np.frombuffer(data, dtype=np.uint8)) == zlib.crc32(data)


@pytest.mark.parametrize("mean", [10, 64, 200, 383, 384, 5000])
def test_crc32_many(mean: int) -> None:
    rnd = random.Random(mean)
    buffers = [rnd.randbytes(rnd.randrange(0, 2 * mean)) for _ in range(100)]
    assert crc.crc32_many(buffers, mean).tolist() == [zlib.crc32(b) for b in buffers]
    assert crc.crc32_many([], mean).tolist() == []


def test_gzip_engines_agree() -> None:
    rnd = random.Random(4)
    inner = b"".join(rnd.randbytes(rnd.randrange(0, 300)) for _ in range(500))
    ours = compression.gzip_compress(inner)
    assert gzip.decompress(ours) == inner
    assert ours[:10] == compression.GZIP_HEADER
    assert compression.gzip_decompress(ours, len(inner)) == inner
    assert compression.gzip_decompress(gzip.compress(inner, 9) + gzip.compress(b"x"),
                                       len(inner) + 1) == inner + b"x"
    with pytest.raises(DecompressedSizeError):
        compression.gzip_decompress(ours, len(inner) - 1)


def test_gzip_bound_does_not_inflate_the_bomb() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB from ~64 KB
    with pytest.raises(DecompressedSizeError):
        compression.gzip_decompress(bomb, 1 << 20)
    values = decode_message_set(encode_message_set([b"v" * 100], compression="gzip"))
    assert values.batch.column("value").to_pylist() == [b"v" * 100]
