"""CRC-32 checks of many payloads in one pass over their concatenation.

A Python call per message (``crc32(view[a:b])``) costs more than the CRC itself for
200-byte payloads, so the decoder checks all payloads of a message set at once, with one
``crc32`` call over the Arrow value buffer it builds anyway.

Why that is exact: let ``g(r, M)`` be the CRC register after feeding ``M`` into register ``r``
(zlib's reflected CRC-32, no final xor). ``g`` is linear, so ``crc32(P) = L(P) ^ K(len(P))`` with
``L(P) = g(0, P)`` and ``K(n) = crc32(b"\\0" * n)``, and a register ``r`` followed by its own four
bytes little-endian is zeroed: ``g(r, le32(r)) = 0``. Hence, for ``D = P1 | P2 | ... | Pn`` and
``B`` holding ``le32(c_i ^ K(len(P_i)))`` at the end of each ``P_i`` (xor-ed where they overlap)::

    L((D | 0000) ^ B) = xor_i x^(8*(bytes after P_i) + 32) * (L(P_i) ^ c_i ^ K(len(P_i)))  mod G

which is 0 when every stored ``c_i`` is right. A wrong one leaves a non-zero error polynomial
that is caught exactly as a CRC-32 over the whole set catches errors: every single corrupted
message is detected (multiplying by ``x^k`` mod G is invertible), several independent ones
slip through with probability 2^-32. On a mismatch the caller re-checks message by message to
name the first bad one, so errors always carry both CRCs of the offending message.

Engine: ISA-L's CRC-32 (python-isal, ``isal.isal_zlib.crc32``, the same reflected CRC-32 as
zlib's, bit for bit) when it imports, many times faster than stdlib ``zlib.crc32`` on large
buffers; otherwise ``zlib.crc32``. This module holds the one probe for python-isal:
:mod:`.compression` takes its inflater from :data:`isal_zlib` too.
"""

from __future__ import annotations

import ctypes
import os
import zlib
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

# --- engines: the one probe for python-isal --------------------------------------------------

isal_zlib: ModuleType | None
try:
    from isal import isal_zlib
except ImportError:  # pragma: no cover - isal is a dependency; the fallback is tested apart
    isal_zlib = None

crc32: Callable[..., int]
if isal_zlib is not None:
    crc32 = isal_zlib.crc32
    CRC32_ENGINE = "isal"
else:  # pragma: no cover
    crc32 = zlib.crc32
    CRC32_ENGINE = "zlib"
"""``crc32(data, value=0)``: zlib's CRC-32, from the fastest engine that imports."""


def isal_crc_address(path: str | None) -> int:
    """The address of ISA-L's ``crc32_gzip_refl`` in the shared object at ``path`` (python-isal's
    ``isal_zlib``, already loaded), or 0: it is not loaded or has no such symbol. The compiled
    kernel calls it directly (``crc_engine_at``); looking it up here keeps the kernel free of
    dynamic-loader symbols, which would raise the glibc its wheel needs."""
    if path is None:
        return 0
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        return ctypes.cast(lib.crc32_gzip_refl, ctypes.c_void_p).value or 0
    except (OSError, AttributeError):
        return 0


# Many small buffers, one call each (the encoder's CRC per message): for buffers of 64 to ~400
# bytes ISA-L's fixed cost per call outweighs what it saves per byte, so zlib's is used there;
# outside that range zlib's is the slower one.
_ZLIB_SMALL = (64, 384)

_ZERO_TABLE_SIZE = 4096
_zero_table: npt.NDArray[np.uint32] | None = None
_zero_cache: dict[int, int] = {}
_ZERO_CACHE_MAX = 4096
_INIT_ZERO = 0xFFFFFFFF  # zlib.crc32(data, 0xFFFFFFFF) starts from register 0: ~L(data)


def crc32_many(buffers: Iterable[Any], mean_size: int) -> npt.NDArray[np.uint32]:
    """``crc32(b)`` for every buffer ``b`` (one C-level ``map``, by the engine whose per-call
    cost is lowest for buffers of ``mean_size`` bytes)."""
    fn = zlib.crc32 if _ZLIB_SMALL[0] <= mean_size < _ZLIB_SMALL[1] else crc32
    return np.fromiter(map(fn, buffers), dtype=np.uint32)


def _table() -> npt.NDArray[np.uint32]:
    global _zero_table
    if _zero_table is None:
        table = np.empty(_ZERO_TABLE_SIZE, dtype=np.uint32)
        crc = 0
        zero = b"\0"
        for n in range(_ZERO_TABLE_SIZE):
            table[n] = crc
            crc = zlib.crc32(zero, crc)  # 1-byte calls: zlib's call is cheapest
        _zero_table = table
    return _zero_table


def zeros_crc(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    """``crc32(b"\\0" * n)`` for every ``n`` in ``lengths``."""
    table = _table()
    if len(lengths) == 0:
        return np.zeros(0, dtype=np.uint32)
    if int(lengths.max()) < _ZERO_TABLE_SIZE:
        return table[lengths]
    out = table[np.minimum(lengths, _ZERO_TABLE_SIZE - 1)]
    big = np.flatnonzero(lengths >= _ZERO_TABLE_SIZE)
    for length in np.unique(lengths[big]).tolist():
        value = _zero_cache.get(length)
        if value is None:
            if len(_zero_cache) >= _ZERO_CACHE_MAX:
                _zero_cache.clear()
            value = _zero_cache[length] = crc32(bytes(length), 0)
        out[big[lengths[big] == length]] = value
    return out


def _verify_spaced(
    data: npt.NDArray[np.uint8], ends: npt.NDArray[np.integer[Any]], v: npt.NDArray[np.uint32]
) -> bool:
    """:func:`verify_concatenated` when every payload has 4+ bytes and there are 2+ of them."""
    total = len(data)
    # every word but the last fits inside data, 4+ bytes apart: one uint32 view with a
    # slot at every byte; the last word goes to the tail (data's last 4 bytes, 4 zeros)
    view = np.ndarray((total - 3,), "<u4", data, 0, (1,))
    index, words = ends[:-1], v[:-1]
    view[index] ^= words
    try:
        last = data[total - 4 :].tobytes() + int(v[-1]).to_bytes(4, "little")
        crc = crc32(data[: total - 4].data, _INIT_ZERO)
        crc = crc32(last, crc)
    finally:
        view[index] ^= words
    return crc == _INIT_ZERO


def verify_concatenated(
    data: npt.NDArray[np.uint8],
    lengths: npt.NDArray[np.int64],
    crcs: npt.NDArray[np.uint32],
    uniform_size: int | None = None,
    *,
    ends: npt.NDArray[np.integer[Any]] | None = None,
) -> bool:
    """Whether ``crcs[i]`` is the CRC-32 of every payload ``i`` of ``data``.

    ``data`` is the payloads back to back (``lengths`` bytes each, summing to ``len(data)``;
    ``uniform_size`` when they all have that size; ``ends`` their cumulative sum, if known).
    It must be writable: it is modified during the check and restored before returning.
    """
    n = len(lengths)
    if n == 0:
        return True
    total = len(data)
    if uniform_size is not None and uniform_size >= 4 and n > 1:
        return _verify_uniform(data, uniform_size, crcs)
    if ends is None:
        ends = np.cumsum(lengths)
    v = crcs ^ zeros_crc(lengths)
    if n > 1 and int(lengths.min()) >= 4:
        return _verify_spaced(data, ends, v)
    ends64: npt.NDArray[np.int64] = ends.astype(np.int64, copy=False)
    if n > 1 and not bool(lengths[1:].all()):
        # empty payloads share their end with the previous one: xor their words together
        first = np.flatnonzero(np.diff(ends64, prepend=-1))
        v = np.bitwise_xor.reduceat(v, first)
        ends64 = ends64[first]
    # words that fit inside data are xor-ed in place, through little-endian uint32 views of
    # data at byte offsets 0..3 (one per residue of the end position); the last few go to an
    # 8-byte tail standing for data[total-4:total] followed by 4 zero bytes
    inside = int(np.searchsorted(ends64, total - 4, side="right"))
    groups = _residue_groups(data, ends64[:inside], v[:inside])
    for view, index, words in groups:
        view[index] ^= words
    try:
        tail = bytearray(8)
        keep = min(4, total)
        tail[4 - keep : 4] = data[total - keep :].tobytes()
        for end, word in zip(ends64[inside:].tolist(), v[inside:].tolist(), strict=True):
            base = end - (total - 4)
            for j in range(4):
                tail[base + j] ^= (word >> (8 * j)) & 0xFF
        crc = crc32(data[: max(total - 4, 0)].data, _INIT_ZERO)
        crc = crc32(tail, crc)
    finally:
        for view, index, words in groups:
            view[index] ^= words
    return crc == _INIT_ZERO


def _residue_groups(
    data: npt.NDArray[np.uint8], ends: npt.NDArray[np.int64], words: npt.NDArray[np.uint32]
) -> list[tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], npt.NDArray[np.uint32]]]:
    """``(uint32 view of data from byte r, word index, words)`` for the ends with ``end % 4 == r``.

    Within one group the words are 4 bytes apart at least, so they never overlap.
    """
    if len(ends) == 0:
        return []
    total = len(data)
    if len(ends) == 1 or int(np.diff(ends).min()) >= 4:
        # words at least 4 bytes apart: one uint32 view with a slot at every byte
        return [(np.ndarray((total - 3,), "<u4", data, 0, (1,)), ends, words)]
    residue = ends & 3
    first = int(residue[0])
    if bool((residue == first).all()):
        parts = [(first, ends, words)]
    else:
        parts = []
        for r in range(4):
            mask = residue == r
            parts.append((r, ends[mask], words[mask]))
    groups = []
    for r, group_ends, group_words in parts:
        if len(group_ends):
            view = np.ndarray(((total - r) // 4,), "<u4", data, r, (4,))
            groups.append((view, (group_ends - r) >> 2, group_words))
    return groups


def _verify_uniform(data: npt.NDArray[np.uint8], size: int, crcs: npt.NDArray[np.uint32]) -> bool:
    """:func:`verify_concatenated` for ``n`` payloads of ``size >= 4`` bytes each: the words go
    through one strided uint32 view (every ``size`` bytes), no index arrays."""
    n = len(crcs)
    total = n * size
    v = crcs ^ zeros_crc(np.array([size], dtype=np.int64))[0]
    view = np.ndarray((n - 1,), "<u4", data, size, (size,))
    view ^= v[:-1]
    try:
        tail = bytearray(data[total - 4 : total].tobytes())
        tail += int(v[-1]).to_bytes(4, "little")
        crc = crc32(data[: total - 4].data, _INIT_ZERO)
        crc = crc32(tail, crc)
    finally:
        view ^= v[:-1]
    return crc == _INIT_ZERO

