"""``kafka07 --version``: which engine does each codec's work in this process: a compiled
kernel or its pure-Python twin (same results; :mod:`kafka_pyspark._shared.native` decides at
import, and ``KAFKA_PYSPARK_PURE=1`` forces the twins), and which library inflates,
decompresses and checksums. The facts are the modules' own (``ENGINE``, ``GZIP_ENGINE``,
``CRC32_ENGINE``, the loaded lanes), read here, never restated. It lives in the CLI because
it reads both :mod:`kafka_pyspark._messages` and :mod:`kafka_pyspark._formats`.
"""

from __future__ import annotations

from kafka_pyspark._shared.native import PURE_ENV, pure_forced

__all__ = ["codec_engines"]

_COMPILED = "compiled"
_PURE = "pure Python"
_LIBRARY = {"isal": "ISA-L (python-isal)", "zlib": "zlib"}


def codec_engines() -> list[tuple[str, str]]:
    """``(what, engine)`` per codec and per step of decoding and encoding, in the order
    ``kafka07 --version`` shows them."""
    from kafka_pyspark._formats import records
    from kafka_pyspark._messages import compression, crc, encode, flat, walk

    kernel = walk.kernel is not None
    crc_engine = ("ISA-L, called from the compiled kernel" if walk.KERNEL_CRC == walk.CRC_ISAL
                  else _LIBRARY[crc.CRC32_ENGINE])
    if flat.gzip_lane is not None:
        gzip = (f"{_COMPILED} (libdeflate, _messages._gzip); "
                f"else {_LIBRARY[compression.GZIP_ENGINE]}")
    else:
        gzip = f"{_LIBRARY[compression.GZIP_ENGINE]} inflate, {_engine(kernel)} walk"
    if kernel:
        snappy = f"{_COMPILED} (the kernel's own decoder, _messages._kernel)"
    else:
        snappy = f"{_PURE} walk, {compression.SNAPPY_ENGINE or 'no library installed'}"
    return [
        ("engine", f"{_PURE} ({PURE_ENV} is set)" if pure_forced()
         else "compiled kernels where built, else their pure-Python twins"),
        ("decode none", f"{_engine(kernel)} (_messages._kernel)" if kernel else _PURE),
        ("decode gzip", gzip),
        ("decode snappy", snappy),
        ("CRC-32", crc_engine),
        ("encode", f"{_COMPILED} (_messages._encode: snappy our own, gzip libdeflate level "
         f"{encode.GZIP_DEFAULT_LEVEL}, CRC-32 {encode.ENCODE_CRC}"
         f"{' and AVX-512 fold lanes' if encode.ENCODE_LANES else ''})"
         if encode.ENGINE == "kernel" else
         f"{_PURE} (gzip: zlib, snappy: {compression.SNAPPY_ENGINE or 'no library installed'})"),
        ("record batches v2 (.log)", f"{_engine(records.ENGINE == 'kernel')}"
         + (" (_formats._v2kernel)" if records.ENGINE == "kernel" else "")),
    ]


def _engine(compiled: bool) -> str:
    return _COMPILED if compiled else _PURE
