"""The Spark DataSource "kafka07": options, planning, batch/stream readers, writers.

pyspark is not a dependency of the package (a runtime's own Spark must not be replaced): it
comes with the runtime, with ``pip install 'pyspark>=4.0'``, or with the ``spark`` extra.
Importing this package without it, or with a pyspark older than the Python DataSource API the
connector needs, fails here with the error that says so; the codecs, the client, the CLI and
the embedded broker never import it.
"""

from __future__ import annotations

from kafka_pyspark.errors import INSTALL_SPARK

#: the oldest pyspark the connector runs on (``docs/running.md``: what needs a later one)
MIN_PYSPARK = (4, 0)

_INSTALL = f"{INSTALL_SPARK} (or run where Spark is installed)"


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def _check_pyspark() -> None:
    want = ".".join(map(str, MIN_PYSPARK))
    try:
        import pyspark
    except ImportError as e:
        raise ImportError(
            f"the kafka07 Spark data source needs pyspark {want} or later, which is not "
            f"installed: {_INSTALL}"
        ) from e
    if _version_tuple(pyspark.__version__) < MIN_PYSPARK:
        raise ImportError(
            f"the kafka07 Spark data source needs pyspark {want} or later (its Python "
            f"DataSource API); this is pyspark {pyspark.__version__}"
        )


_check_pyspark()
