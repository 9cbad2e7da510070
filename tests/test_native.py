"""Loading the compiled kernels: a kernel that disagrees with its Python side is not used."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator

import pytest

from kafka_pyspark import _native
from kafka_pyspark._native import KernelMismatchWarning, kernel_mismatches, load_kernel
from kafka_pyspark.messages import walk

KERNEL = "kafka_pyspark.messages._kernel"
BUILT = importlib.util.find_spec(KERNEL) is not None


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
        "ST_SHORT_V1": 6, "ST_WRAPPER": 7,
    }
    if not _native.pure_forced():
        assert walk.kernel is kernel


@pytest.mark.skipif(not BUILT, reason="the compiled kernel is not built")
def test_a_drift_between_the_built_kernel_and_layout_stops_its_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(_native.PURE_ENV, raising=False)
    drifted = {**walk.KERNEL_CONSTANTS, "LENGTH_SIZE": 8}
    with pytest.warns(KernelMismatchWarning, match=r": LENGTH_SIZE is 4, not 8\. Rebuild"):
        assert load_kernel(KERNEL, constants=drifted) is None
