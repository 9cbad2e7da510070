"""``kafka07`` in SQL: temporary views work, catalog tables cannot (docs/sql.md).

Measured on Spark 4.3: ``CREATE TABLE t USING kafka07 OPTIONS (...)`` stores the table in the
session catalog without its OPTIONS. Spark hands them to the data source once, at
``CREATE TABLE`` (as ``option.<name>`` beside ``provider`` and ``owner``, for the schema),
and never again: the table's reads and writes get no option at all, so they could never reach
a cluster. ``CREATE TEMPORARY VIEW v [(columns)] USING kafka07 OPTIONS (...)`` keeps them, for
``SELECT`` and ``INSERT INTO`` alike. This module turns both ways of meeting a catalog table
into one error that says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_pyspark.errors import OptionError

__all__ = ["CATALOG_TABLE_HINT", "refuse_catalog_table"]

#: the alternative, named in both errors
CATALOG_TABLE_HINT = (
    "use CREATE TEMPORARY VIEW <name> [(<columns>)] USING kafka07 OPTIONS (...) instead: a "
    "view keeps its options for SELECT and INSERT INTO (docs/sql.md)"
)
#: the option name Spark gives a table's OPTIONS at CREATE TABLE (``option.zk.connect``)
_TABLE_OPTION_PREFIX = "option."


def refuse_catalog_table(options: Mapping[str, Any]) -> None:
    """:class:`OptionError` for what Spark hands the source at ``CREATE TABLE ... USING
    kafka07`` (table properties) and for no options at all (what a catalog table's reads and
    writes get); anything else passes, for the option parsers to check."""
    keys = {str(k).lower() for k in options}
    if not keys:
        raise OptionError(
            "zk.connect",
            "no options at all: one of zk.connect or broker.list is required. A table made by "
            "CREATE TABLE ... USING kafka07 comes to kafka07 with none (Spark's catalog does not "
            f"keep a Python data source's options); {CATALOG_TABLE_HINT}",
        )
    if "provider" in keys and any(k.startswith(_TABLE_OPTION_PREFIX) for k in keys):
        raise OptionError(
            "CREATE TABLE",
            "kafka07 cannot be a catalog table: Spark keeps a Python data source's table "
            f"without its OPTIONS, so its reads and writes could never reach the cluster; "
            f"{CATALOG_TABLE_HINT}",
        )
