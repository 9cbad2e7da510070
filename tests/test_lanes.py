"""tests/lanes.py, ``make test``'s runner: both halves run, each once, and a failure in either
fails the whole (a suite of its own in a temporary folder, two real pytest runs)."""

from __future__ import annotations

import io
from pathlib import Path

import lanes
import pytest


def write_suite(root: Path, *, beside_passes: bool, shown_passes: bool) -> list[str]:
    """Three tests: one marked ``side``, one marked ``slow`` (left out by the selection) and
    one plain; the pytest arguments that run them in ``root`` alone."""
    (root / "pytest.ini").write_text(
        "[pytest]\naddopts = --strict-markers\nmarkers =\n    side: beside\n    slow: left out\n"
    )
    (root / "test_side.py").write_text(
        f"import pytest\n\n@pytest.mark.side\ndef test_beside():\n    assert {beside_passes}\n\n"
        "@pytest.mark.side\n@pytest.mark.slow\ndef test_left_out():\n    assert False\n"
    )
    (root / "test_plain.py").write_text(f"def test_shown():\n    assert {shown_passes}\n")
    return ["-q", "-c", str(root / "pytest.ini"), "--rootdir", str(root), str(root)]


@pytest.mark.parametrize(
    ("beside_passes", "shown_passes", "status"),
    [(True, True, 0), (False, True, 1), (True, False, 1), (False, False, 1)],
)
def test_both_halves_run_and_either_failure_fails(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], beside_passes: bool, shown_passes: bool,
    status: int,
) -> None:
    args = write_suite(tmp_path, beside_passes=beside_passes, shown_passes=shown_passes)
    out = io.StringIO()
    assert lanes.run("side", "not slow", args, out) == status
    shown = capfd.readouterr().out  # the half shown as it runs writes to this process's stdout
    beside = out.getvalue()
    assert ("1 passed, 2 deselected" if shown_passes else "1 failed, 2 deselected") in shown
    assert "test_beside" not in shown and "test_shown" not in beside
    assert "==== beside it: pytest -m '(side) and (not slow)' ====" in beside
    assert ("1 passed, 2 deselected" if beside_passes else "1 failed, 2 deselected") in beside
    assert "test_left_out" not in beside + shown
    assert f"-m 'not (side) and (not slow)': exit {0 if shown_passes else 1} after" in beside
    assert f"-m '(side) and (not slow)': exit {0 if beside_passes else 1} after" in beside


def test_nothing_collected_beside_is_no_failure(tmp_path: Path) -> None:
    args = write_suite(tmp_path, beside_passes=True, shown_passes=True)
    out = io.StringIO()
    assert lanes.run("slow and not slow", "not slow", args, out) == 0
    assert "exit 5 after" in out.getvalue()


def test_a_marker_expression_goes_in_select() -> None:
    with pytest.raises(SystemExit) as info:
        lanes.main(["--split", "side", "--", "-m", "not slow", "tests"])
    assert info.value.code == 2
