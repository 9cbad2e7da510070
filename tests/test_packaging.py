"""Packaging facts that broke before: LICENSE, project URLs, README links, classifiers, the
pyarrow floor."""

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


def test_no_url_to_a_home_that_does_not_exist() -> None:
    """The project has no public home: no project URLs in the metadata, and README's links are
    relative, each to a file or folder of the repository (an anchor to one of its headings)."""
    assert "urls" not in PROJECT
    text = (REPO / "README.md").read_text()
    links = LINK.findall(text)
    assert links, "README has links"
    for url in links:
        assert "://" not in url, f"README links to {url!r}, outside the repository"
        path, _, anchor = url.partition("#")
        assert (REPO / path).exists(), f"README links to {path}, which does not exist"
        if anchor:
            headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                        for h in re.findall(r"^#+ (.+)$", (REPO / path).read_text(), re.M)}
            assert anchor in headings, f"README links to {url}: no such heading"
    assert "github.com" not in text


def test_classifiers_name_only_what_make_dist_builds() -> None:
    """Linux wheels and the pure wheel are built and tested; no other operating system is
    claimed (docs/dev/RELEASING.md), and the Python versions are the ones `make dist` builds."""
    systems = [c for c in PROJECT["classifiers"] if c.startswith("Operating System ::")]
    assert systems == ["Operating System :: POSIX :: Linux"]
    versions = {c.rsplit(" ", 1)[1] for c in PROJECT["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    makefile = (REPO / "Makefile").read_text()
    built = re.search(r"for v in ([\d. ]+); do", makefile)
    assert built is not None and versions == set(built.group(1).split())


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
