"""The fault points of the exactly-once protocol: no-op unless armed, fire once per run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_pyspark._write.faults import FAULT_DIR_ENV, FAULT_ENV, fault_point, parse_fault

_CALL = "from kafka_pyspark._write.faults import fault_point; fault_point({!r}); print('on')"


def _run(point: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CALL.format(point)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)


def test_unarmed_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    fault_point("mid-send")  # returns


def test_fires_once_then_lets_the_retry_through(tmp_path: Path) -> None:
    env = {FAULT_ENV: "after-intent", FAULT_DIR_ENV: str(tmp_path)}
    other = _run("before-intent", env)  # another point: nothing happens
    assert (other.returncode, other.stdout) == (0, "on\n")
    first = _run("after-intent", env)
    assert first.returncode == -signal.SIGKILL and first.stdout == ""
    assert (tmp_path / "after-intent.fired").exists()
    second = _run("after-intent", env)
    assert (second.returncode, second.stdout) == (0, "on\n")


def test_parent_kill_kills_the_parent(tmp_path: Path) -> None:
    env = {FAULT_ENV: "after-done:parent", FAULT_DIR_ENV: str(tmp_path)}
    # a shell as the parent: the point SIGKILLs it, the shell's own echo never runs
    cmd = f"{sys.executable} -c \"{_CALL.format('after-done')}\"; echo survived"
    out = subprocess.run(["sh", "-c", cmd], env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL and "survived" not in out.stdout


def test_bad_spec_names_the_variable() -> None:
    assert parse_fault("mid-send") == ("mid-send", "self")
    assert parse_fault("during-commit:driver") == ("during-commit", "driver")
    with pytest.raises(ValueError, match=FAULT_ENV):
        parse_fault("mid-sned")
    with pytest.raises(ValueError, match="kill one of"):
        parse_fault("mid-send:everyone")
