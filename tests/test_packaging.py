"""Packaging facts that broke before: LICENSE, project URLs, README links, the pyarrow floor."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_license_file_is_the_apache_2_text() -> None:
    text = (REPO / "LICENSE").read_text()
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_readme_links_are_absolute_under_the_one_repository_url() -> None:
    repo = PROJECT["urls"]["Repository"]
    assert all(url.startswith(repo) for url in PROJECT["urls"].values())
    links = LINK.findall((REPO / "README.md").read_text())
    assert links, "README has links"
    for url in links:
        assert url.startswith(repo + "/"), f"README link {url!r} is not under {repo}"
        kind, branch, path = url[len(repo) + 1:].split("/", 2)
        assert (kind, branch) in (("blob", "main"), ("tree", "main"))
        assert (REPO / path).exists(), f"README links to {path}, which does not exist"


def test_pyarrow_floor_is_pysparks_own() -> None:
    from importlib.metadata import requires

    from packaging.version import Version

    def floor(reqs: list[str], name: str) -> str:
        found = {m.group(1) for r in reqs if (m := re.match(rf"{name}>=([0-9.]+)", r))}
        assert len(found) == 1, (name, reqs)
        return found.pop()

    pyspark_floor = floor(requires("pyspark") or [], "pyarrow")
    ours = floor(PROJECT["dependencies"], "pyarrow")
    assert Version(ours) >= Version(pyspark_floor)


def test_sdist_manifest_carries_the_tests() -> None:
    manifest = (REPO / "MANIFEST.in").read_text().split()
    for needed in ("tests", "docs", "notebooks", "spark-conf"):
        assert needed in manifest
