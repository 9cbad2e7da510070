"""Loading the compiled kernels: a kernel that disagrees with its Python side is not used."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator, Mapping

import pytest

from kafka_pyspark._formats import records
from kafka_pyspark._messages import encode, flat, walk
from kafka_pyspark._shared import native as _native
from kafka_pyspark._shared.native import KernelMismatchWarning, kernel_mismatches, load_kernel

KERNEL = "kafka_pyspark._messages._kernel"
BUILT = importlib.util.find_spec(KERNEL) is not None
GZIP = "kafka_pyspark._messages._gzip"
GZIP_BUILT = importlib.util.find_spec(GZIP) is not None
V2 = "kafka_pyspark._formats._v2kernel"
V2_BUILT = importlib.util.find_spec(V2) is not None
ENCODE = "kafka_pyspark._messages._encode"


@pytest.fixture
def fake_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.delenv(_native.PURE_ENV, raising=False)
    module = types.ModuleType("kp_test_fake_kernel")
    vars(module).update(SIZE=24, MASK=3)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    yield module


def test_a_kernel_that_agrees_is_used(fake_kernel: types.ModuleType) -> None:
    assert load_kernel(fake_kernel.__name__, constants={"SIZE": 24, "MASK": 3}) is fake_kernel


def test_a_kernel_that_disagrees_is_not_used_and_every_difference_is_named(
    fake_kernel: types.ModuleType,
) -> None:
    with pytest.warns(KernelMismatchWarning) as caught:
        got = load_kernel(fake_kernel.__name__, constants={"SIZE": 32, "MASK": 3, "NEW": 1})
    assert got is None
    assert [str(w.message) for w in caught] == [
        "kp_test_fake_kernel is not used (the pure-Python path is): it disagrees with its "
        "Python side: SIZE is 24, not 32; NEW is missing, not 1. Rebuild it (make setup)"
    ]


def test_matches_is_still_asked_after_the_constants(fake_kernel: types.ModuleType) -> None:
    assert load_kernel(fake_kernel.__name__, lambda m: False, {"SIZE": 24}) is None


@pytest.mark.skipif(not BUILT, reason="the compiled kernel is not built")
def test_the_built_decode_kernel_exports_every_constant_it_repeats_with_the_python_value() -> None:
    kernel = importlib.import_module(KERNEL)
    assert kernel_mismatches(kernel, walk.KERNEL_CONSTANTS) == []
    # what the kernel repeats from layout.py and walk.py, written out by hand from PROTOCOL.md
    # "Messages"
    assert {k: getattr(kernel, k) for k in walk.KERNEL_CONSTANTS} == {
        "RECORD_SIZE": 24, "RECORD_START": 0, "RECORD_LENGTH": 8, "RECORD_CRC": 12,
        "RECORD_MAGIC": 16, "RECORD_CODEC": 17, "LENGTH_SIZE": 4, "MIN_LENGTH": 5,
        "MIN_LENGTH_V1": 6, "HEADER_V0_SIZE": 9, "HEADER_V1_SIZE": 10,
        "MAX_MESSAGE_LENGTH": 1 << 30, "CODEC_MASK": 3, "ST_END": 0, "ST_SHORT": 1,
        "ST_PARTIAL": 2, "ST_BAD_LENGTH": 3, "ST_BAD_MAGIC": 4, "ST_BAD_CODEC": 5,
        "ST_SHORT_V1": 6, "ST_WRAPPER": 7, "ST_FULL": 8, "ST_BAD_SNAPPY": 9, "ST_BAD_CRC": 10,
        "ST_BAD_GZIP": 11, "CODEC_NONE": 0, "CODEC_GZIP": 1, "CODEC_SNAPPY": 2,
        "CHECK_OK": 0xFFFFFFFF, "CHECK_CHUNK": 256 << 10, "CRC_ISAL": 1, "CRC_LIBDEFLATE": 2,
    }
    if not _native.pure_forced():
        assert walk.kernel is kernel


@pytest.mark.skipif(not GZIP_BUILT, reason="the gzip lane is not built")
def test_the_gzip_lane_exports_the_same_constants_from_the_same_header() -> None:
    lane = importlib.import_module(GZIP)
    assert kernel_mismatches(lane, walk.KERNEL_CONSTANTS) == []
    if not _native.pure_forced():
        assert flat.gzip_lane is lane


@pytest.mark.skipif(not V2_BUILT, reason="the v2 record kernel is not built")
def test_the_built_v2_kernel_exports_every_constant_it_repeats_with_the_python_value() -> None:
    kernel = importlib.import_module(V2)
    assert kernel_mismatches(kernel, records.KERNEL_CONSTANTS) == []
    # what _v2kernel.c repeats from records.py and varint.py, written out by hand
    fields = ["END", "TIMESTAMP", "OFFSET", "KEY_POS", "KEY_LEN", "VALUE_POS", "VALUE_LEN",
              "HEADERS_POS", "HEADER_COUNT"]
    what = ["LENGTH", "TIMESTAMP", "OFFSET", "KEY_LENGTH", "KEY", "VALUE_LENGTH", "VALUE",
            "HEADER_COUNT", "HEADER_KEY_LENGTH", "HEADER_KEY", "HEADER_VALUE_LENGTH",
            "HEADER_VALUE", "RECORD"]
    statuses = ["OK", "MALFORMED", "PAST", "NEGATIVE", "LENGTH", "LEFT", "TRAILING"]
    assert {k: getattr(kernel, k) for k in records.KERNEL_CONSTANTS} == {
        "MIN_RECORD": 6, "VARINT_MAX": 5, "VARLONG_MAX": 10, "FIELDS": 9, "HFIELDS": 4,
        **{f"F_{name}": i for i, name in enumerate(fields)},
        **{f"H_{name}": i for i, name in enumerate(["KEY_POS", "KEY_LEN", "VALUE_POS",
                                                     "VALUE_LEN"])},
        **{f"ST_{name}": i for i, name in enumerate(statuses)},
        **{f"W_{name}": i for i, name in enumerate(what)},
    }
    assert [records.WHAT[getattr(kernel, f"W_{name}")] for name in ("KEY", "RECORD")] == [
        "key", "record"]
    if not _native.pure_forced():
        assert records.kernel is kernel


@pytest.mark.parametrize(("name", "constants", "key", "value"), [
    (KERNEL, walk.KERNEL_CONSTANTS, "LENGTH_SIZE", 4),
    (GZIP, walk.KERNEL_CONSTANTS, "CODEC_GZIP", 1),
    (V2, records.KERNEL_CONSTANTS, "ST_LEFT", 5),
])
def test_a_drift_between_a_built_kernel_and_its_python_side_stops_its_use(
    name: str, constants: Mapping[str, int], key: str, value: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not built")
    monkeypatch.delenv(_native.PURE_ENV, raising=False)
    drifted = {**constants, key: value + 4}
    with pytest.warns(KernelMismatchWarning,
                      match=rf": {key} is {value}, not {value + 4}\. Rebuild"):
        assert load_kernel(name, constants=drifted) is None


@pytest.mark.skipif(importlib.util.find_spec(ENCODE) is None, reason="the encode pass is not built")
def test_the_encode_pass_exports_the_same_constants_from_the_same_header() -> None:
    module = importlib.import_module(ENCODE)
    assert kernel_mismatches(module, encode.ENCODE_CONSTANTS) == []
    assert module.SNAPPY_BLOCK_SIZE == 32 * 1024  # snappy-java's block (compression.py)
    if not _native.pure_forced():
        assert encode._kernel is module
