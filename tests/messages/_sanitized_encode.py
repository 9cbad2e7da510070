"""Run by ``test_encode_sanitized.py`` in a process with AddressSanitizer and UBSan preloaded:
``python _sanitized_encode.py MODULE_PATH SEED CALLS``. Loads the encode module built with both
sanitizers from MODULE_PATH and calls its entry point on random columns (payloads of every
size class the fold lanes and the per-payload path meet, the data buffer exactly the payloads'
bytes, so a read past it is a sanitizer report), with the lanes on and off, every codec and
magic, into a new buffer, an exactly-sized one and one of exactly the room the module asks
for (every codec); each result checked against zlib's CRCs
and the pure-Python encoder. Prints ``sanitized ok`` and the lanes' state when done."""

from __future__ import annotations

import importlib.util
import itertools
import random
import sys
import zlib

import numpy as np

from kafka_pyspark._messages import encode


def _module(path: str) -> object:
    spec = importlib.util.spec_from_file_location("_encode", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _size(rnd: random.Random) -> int:
    return rnd.choice([rnd.randrange(0, 20), rnd.randrange(0, 300), rnd.randrange(2040, 2060),
                       rnd.randrange(0, 5000), 16 * rnd.randrange(1, 9)])


def main(path: str, seed: int, calls: int) -> None:
    kernel: object = _module(path)
    lanes = kernel.frame_lanes(1)  # type: ignore[attr-defined]
    rnd = random.Random(seed)
    asked: list[int] = []

    def take(room: int) -> np.ndarray:
        asked.append(room)
        return np.empty(room, np.uint8)  # exactly the room asked for

    for call in range(calls):
        n = rnd.randrange(0, 120)
        values = [rnd.randbytes(_size(rnd)) for _ in range(n)]
        data = b"".join(values)  # a bytes object of exactly these bytes (PYTHONMALLOC=malloc)
        offsets = np.cumsum([0, *map(len, values)]).astype(np.int64)
        cuts = sorted({0, n, *(rnd.randrange(n + 1) for _ in range(3))})
        codec, magic = call % 3, rnd.randrange(2)
        crcs = np.zeros(n, np.uint32)
        outs = []
        for on in (1, 0):
            kernel.frame_lanes(on)  # type: ignore[attr-defined]
            out, ends = kernel.encode_sets(  # type: ignore[attr-defined]
                offsets, data, np.array(cuts, np.int64), magic, codec, 6, crcs)
            outs.append(bytes(out))
            if codec == 0 and len(out):
                into = np.empty(len(out), np.uint8)  # exactly the sets' size
                kernel.encode_sets(  # type: ignore[attr-defined]
                    offsets, data, np.array(cuts, np.int64), magic, codec, 6, None, into)
                assert into.tobytes() == bytes(out)
            asked.clear()
            got, _ = kernel.encode_sets(  # type: ignore[attr-defined]
                offsets, data, np.array(cuts, np.int64), magic, codec, 6, None, take)
            assert got[:len(out)].tobytes() == bytes(out), call
            assert asked == [len(got)] and (asked[0] == len(out) if codec == 0
                                            else asked[0] >= len(out)), call
        assert outs[0] == outs[1], call
        assert crcs.tolist() == [zlib.crc32(v) for v in values], call
        at = np.frombuffer(ends, np.int64).tolist()
        if codec != 1:  # none, snappy: the pure encoder's bytes
            for j, (a, b) in enumerate(itertools.pairwise(cuts)):
                want = (encode.encode_message_set(values[a:b], magic=magic, compression=codec)
                        if a < b else b"")
                assert outs[0][at[j]:at[j + 1]] == want, (call, j)
    print("sanitized ok, lanes", lanes)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
