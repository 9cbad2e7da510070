"""The compiled encode pass under AddressSanitizer and UBSan: the module's sources (setup.py's
list) built with both, then fuzzed in a child process (``_sanitized_encode.py``) with the
sanitizers preloaded and Python's allocator set to malloc, so that every payload buffer ends
where its bytes end and a read or write past it is reported. Any report fails the test (UBSan's
made fatal); so does a result that differs from zlib's CRCs or the pure-Python encoder.
Skipped where no C compiler with the sanitizers' runtimes, or no libdeflate, is found."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("_sanitized_encode.py")
FLAGS = ["-shared", "-fPIC", "-O1", "-g", "-std=c99", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]


def _encode_sources() -> list[str]:
    """The encode module's C sources, as setup.py lists them (read from its syntax tree: the
    `_module("kafka_pyspark._messages._encode", sources, ...)` call, its constants evaluated)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    names = {t.id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
             for t in node.targets if isinstance(t, ast.Name)}
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
               and isinstance(n.args[0], ast.Constant)
               and n.args[0].value == "kafka_pyspark._messages._encode"]
    sources: list[str] = eval(compile(ast.Expression(call.args[1]), "setup.py", "eval"), names)
    return [str(ROOT / s) for s in sources]


def _runtime(cc: str, name: str) -> str | None:
    out = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True)
    path = out.stdout.strip()
    return path if out.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


def test_encode_pass_under_address_and_undefined_sanitizers(tmp_path: Path) -> None:
    cc = shutil.which(os.environ.get("CC", "cc"))
    asan = cc and _runtime(cc, "libasan.so")
    ubsan = cc and _runtime(cc, "libubsan.so")
    if not (cc and asan and ubsan):
        pytest.skip("no C compiler with AddressSanitizer and UBSan runtimes")
    module = tmp_path / "_encode.so"
    build = subprocess.run(
        [cc, *FLAGS, f"-I{sysconfig.get_paths()['include']}", *_encode_sources(),
         "-l:libdeflate.a", "-o", str(module)], capture_output=True, text=True)
    if build.returncode and "libdeflate" in build.stderr:
        pytest.skip("libdeflate is not installed")
    assert build.returncode == 0, build.stderr
    env = {**os.environ, "PYTHONMALLOC": "malloc", "LD_PRELOAD": f"{asan} {ubsan}",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0", "UBSAN_OPTIONS": "halt_on_error=1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(CHILD.parent)])}
    for seed in (1, 2):
        run = subprocess.run([sys.executable, str(CHILD), str(module), str(seed), "1500"],
                             capture_output=True, text=True, env=env, timeout=300)
        report = run.stdout + run.stderr
        assert run.returncode == 0, report[-4000:]
        assert "Sanitizer" not in report and "runtime error" not in report, report[-4000:]
        assert "sanitized ok" in report
