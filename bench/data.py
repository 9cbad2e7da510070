"""Realistic message values for the benchmarks (not a benchmark module: no ``run``).

Value lengths follow a log-normal distribution (median ``MEDIAN`` bytes, shape ``SIGMA``,
clipped to ``MIN_SIZE`` .. ``MAX_SIZE``), drawn with a fixed seed, so every run and every
benchmark sees the same values. The text is JSON-like log lines (slices of one corpus of
records), as compressible as real event data: gzip ~3x, snappy ~2x.
"""

from __future__ import annotations

import numpy as np

MEDIAN = 180
SIGMA = 0.8  # mean ~250 B, 99th percentile ~1.2 KiB
MIN_SIZE = 20
MAX_SIZE = 8 << 10
SEED = 20_261_122

_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform",
    "victor", "whiskey", "xray", "yankee", "zulu", "error", "warn", "info", "debug", "checkout",
    "cart", "login", "logout", "search", "payment", "refund", "shipped",
)


def _corpus(size: int, rng: np.random.Generator) -> bytes:
    """JSON records back to back, at least ``size`` bytes."""
    parts: list[str] = []
    total = 0
    i = 0
    while total < size:
        words = " ".join(_WORDS[k] for k in rng.integers(0, len(_WORDS), int(rng.integers(3, 30))))
        line = (
            f'{{"ts":{1700000000000 + i * 7},"host":"web-{int(rng.integers(40)):02d}",'
            f'"user":{int(rng.integers(10**6))},"status":{(200, 200, 200, 404, 500)[i % 5]},'
            f'"ms":{int(rng.integers(900))},"trace":"{int(rng.integers(1 << 62)):016x}",'
            f'"msg":"{words}"}}\n'
        )
        parts.append(line)
        total += len(line)
        i += 1
    return "".join(parts).encode()


def lengths(count: int, seed: int = SEED) -> np.ndarray:
    """``count`` value lengths, log-normal, clipped to ``MIN_SIZE`` .. ``MAX_SIZE``."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(np.log(MEDIAN), SIGMA, count)
    return np.clip(np.rint(raw), MIN_SIZE, MAX_SIZE).astype(np.int64)


def realistic_values(count: int, seed: int = SEED) -> list[bytes]:
    """``count`` JSON-like values of log-normal lengths (the same for the same arguments)."""
    rng = np.random.default_rng(seed + 1)
    sizes = lengths(count, seed)
    corpus = _corpus(4 << 20, rng)
    starts = rng.integers(0, len(corpus) - MAX_SIZE, count)
    return [corpus[s : s + n] for s, n in zip(starts.tolist(), sizes.tolist(), strict=True)]
