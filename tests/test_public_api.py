"""The importable public surface is exactly what docs/api.md lists, and its entry points run.

Public: every module of ``kafka_pyspark`` (and ``pyspark_kafka07``) with no name in its dotted
path starting with ``_``; what it offers is its ``__all__``. Everything else is internal.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import kafka_pyspark
import pyspark_kafka07

REPO = Path(__file__).resolve().parent.parent
API = REPO / "docs" / "api.md"

_HEADING = re.compile(r"^## `([\w.]+)`$")
_ROW = re.compile(r"^\| `([\w.]+)[^`]*` \|")


def documented() -> dict[str, set[str]]:
    """Module -> names, from the tables under each ``## `module``` heading of docs/api.md."""
    out: dict[str, set[str]] = {}
    module = None
    for line in API.read_text().splitlines():
        if line.startswith("## "):
            heading = _HEADING.match(line)
            module = heading.group(1) if heading else None
            if module is not None:
                out[module] = set()
        elif module is not None and (row := _ROW.match(line)):
            out[module].add(row.group(1))
    return out


def public_modules() -> list[str]:
    """Every module and package whose dotted name has no ``_`` part (``__main__`` aside)."""
    found = ["kafka_pyspark", "pyspark_kafka07"]
    todo = [kafka_pyspark]
    while todo:
        package = todo.pop()
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name.rsplit(".", 1)[1].startswith("_"):
                continue
            found.append(info.name)
            if info.ispkg:
                todo.append(importlib.import_module(info.name))
    return sorted(found)


def surface(name: str) -> set[str]:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} is public and has no __all__"
    for attr in exported:
        assert getattr(module, attr, None) is not None, f"{name}.__all__ names missing {attr!r}"
    return set(exported)


def test_api_md_lists_each_public_module_once() -> None:
    headings = [m.group(1) for line in API.read_text().splitlines()
                if (m := _HEADING.match(line))]
    assert len(headings) == len(set(headings))
    assert sorted(headings) == public_modules()


def test_public_surface_is_the_documented_list() -> None:
    docs = documented()
    actual = {name: surface(name) for name in public_modules()}
    missing = {m: sorted(names - docs.get(m, set())) for m, names in actual.items()}
    extra = {m: sorted(names - actual.get(m, set())) for m, names in docs.items()}
    missing = {m: v for m, v in missing.items() if v}
    extra = {m: v for m, v in extra.items() if v}
    assert not missing, f"public but not in docs/api.md: {missing}"
    assert not extra, f"in docs/api.md but not importable: {extra}"


def test_private_modules_are_marked() -> None:
    """The internals are under ``_`` names: the package's own top holds only public names."""
    tops = {info.name for info in pkgutil.iter_modules(kafka_pyspark.__path__)}
    assert {t for t in tops if not t.startswith("_")} == {"cli", "client", "demo", "errors",
                                                          "testing"}


def test_default_source_is_the_data_source() -> None:
    assert pyspark_kafka07.DefaultSource is kafka_pyspark.Kafka07DataSource
    assert kafka_pyspark.Kafka07DataSource.name() == "kafka07"


def test_console_script_is_listed() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    text = API.read_text()
    for command, target in scripts.items():
        assert f"| `{command}` | the console script: `{target}` |" in text
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))


@pytest.mark.parametrize("module", re.findall(r"`python -m ([\w.]+)`",
                                              API.read_text().split("## Entry points")[1]))
def test_python_m_entry_points_run(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None
    if spec.submodule_search_locations is not None:
        assert importlib.util.find_spec(module + ".__main__") is not None
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower()
