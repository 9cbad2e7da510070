"""The option tables in docs/ name exactly the options the parsers know, so they cannot drift.

Every ``frozenset`` named ``*_OPTIONS`` in any module under ``kafka_pyspark/`` is picked up,
so an option added to a parser fails here until a docs table lists it (and a table naming an
option no parser knows fails too).
"""

from __future__ import annotations

import importlib
import itertools
import re
from pathlib import Path

from kafka_pyspark import _options as options
from kafka_pyspark._options import segment_path as segment_options

DOCS = Path(__file__).resolve().parent.parent / "docs"
_NAME = re.compile(r"`([A-Za-z][A-Za-z0-9.]*)`")
#: Spark's own sink option, accepted and passed through; documented by Spark
SPARKS_OWN = options.SPARK_SINK_OPTIONS


def table_options(doc: str) -> list[str]:
    """Option names in the first column of the tables whose header is ``| option | meaning``."""
    names: list[str] = []
    in_table = False
    for line in (DOCS / doc).read_text().splitlines():
        if re.match(r"\|\s*option\s*\|\s*meaning\s*\|", line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
        elif in_table and not line.startswith("| ---"):
            names.extend(_NAME.findall(line.split("|")[1]))
    return names


def _known_sets() -> dict[str, frozenset[str]]:
    found = {}
    package = Path(segment_options.__file__).parents[1]  # kafka_pyspark
    for source in sorted(package.rglob("*.py")):
        if not re.search(r"^[A-Z_]+_OPTIONS = frozenset", source.read_text(), re.M):
            continue
        parts = source.relative_to(package).with_suffix("").parts
        module = importlib.import_module(".".join(("kafka_pyspark", *parts)))
        for attr, value in vars(module).items():
            if attr.endswith("_OPTIONS") and isinstance(value, frozenset):
                found[f"{module.__name__}.{attr}"] = value
    return found


def lowered(names: list[str]) -> set[str]:
    return {n.lower() for n in names}


READING = table_options("reading.md")
STREAMING = table_options("streaming.md")
WRITING = table_options("writing.md")
SEGMENTS = table_options("segments.md")


def test_reading_table_is_the_batch_read_and_cluster_options() -> None:
    batch = (options.CLUSTER_OPTIONS | options.READ_OPTIONS) - options.STREAM_ONLY_OPTIONS
    assert batch - lowered(READING) == set(), "read options missing from docs/reading.md"
    unknown = lowered(READING) - options.CLUSTER_OPTIONS - options.READ_OPTIONS
    assert unknown == set(), "docs/reading.md lists options no parser knows"


def test_streaming_table_has_every_stream_only_option() -> None:
    assert lowered(STREAMING) == set(options.STREAM_ONLY_OPTIONS)


def test_writing_table_is_the_write_and_cluster_options() -> None:
    assert lowered(WRITING) == set(options.WRITE_OPTIONS | options.CLUSTER_OPTIONS)


def test_segments_table_is_the_segment_file_options() -> None:
    assert lowered(SEGMENTS) == set(segment_options.SEGMENT_OPTIONS)


def test_every_option_any_parser_knows_is_in_a_docs_table() -> None:
    assert len(_known_sets()) >= 7  # the sets above, found by the scan
    documented = lowered(READING + STREAMING + WRITING + SEGMENTS)
    for name, known in _known_sets().items():
        missing = known - documented - SPARKS_OWN
        assert missing == set(), f"{name}: not in any options table in docs/: {sorted(missing)}"


def test_documented_names_use_the_canonical_spelling() -> None:
    for name in READING + STREAMING:
        assert options.canonical_name(name.lower()) == name
    assert len(READING) == len(set(READING)) and len(WRITING) == len(set(WRITING))


def test_spark_kafka_table_is_the_pointer_table() -> None:
    from kafka_pyspark._options.habits import SPARK_KAFKA_POINTERS

    after = (DOCS / "reading.md").read_text().split("| Spark's `kafka` option |", 1)[1]
    rows = list(itertools.takewhile(lambda line: line.startswith("|"),
                                    after.splitlines()[2:]))
    assert len(rows) >= 10
    named = {n for row in rows for n in re.findall(r"`([A-Za-z][A-Za-z0-9.]*)`",
                                                   row.split("|")[1])}
    assert named == set(SPARK_KAFKA_POINTERS)


def test_docs_table_lists_exactly_the_segment_options() -> None:
    from kafka_pyspark._options.segment_path import SEGMENT_OPTIONS

    assert {n.lower() for n in table_options("segments.md")} == SEGMENT_OPTIONS
