"""``register(spark)`` registers kafka07 in the session once (so that its Python work shares the
session's Python workers), then is idempotent and quiet: no WARN that it replaced the source."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyspark
import pytest

from kafka_pyspark import _registered, register
from kafka_pyspark._spark import _version_tuple

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


pytestmark = pytest.mark.spark

REPLACED = "replaced a previously registered data source"


def test_register_again_logs_no_replacement_warning(
    spark: SparkSession, capfd: pytest.CaptureFixture[str]
) -> None:
    assert _registered(spark, "kafka07")  # conftest registered it (or Spark did by itself)
    capfd.readouterr()
    register(spark)
    register(spark)
    spark.range(1).count()  # let the JVM's console appender flush whatever it had
    assert REPLACED not in capfd.readouterr().err
    assert spark.read.format("kafka07").option("broker.list", "0:127.0.0.1:1").option(
        "subscribe", "t").load().columns[:2] == ["topic", "broker"]


def test_registered_in_the_session_with_the_sessions_python_environment(
    spark: SparkSession,
) -> None:
    """Spark keys its Python workers by the function's environment: the session's (its UDFs')
    for a source registered in the session, another for one Spark found installed by itself.
    register() makes kafka07's the session's, so its first read reuses the session's workers
    (bench/first_row.py measures it). The shared session may have had kafka07 registered by
    an earlier test's register() (later calls do nothing), so this session's mark is dropped
    first: what is checked is what register() registers."""
    import kafka_pyspark

    kafka_pyspark._REGISTERED_IN.discard(kafka_pyspark._session_key(spark) or 0)
    register(spark)
    if _version_tuple(pyspark.__version__) < (4, 1):
        pytest.skip("Spark 4.0 refuses to replace a source it found installed "
                    "(DATA_SOURCE_ALREADY_EXISTS): register() keeps it")
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    env = dict(manager.lookupDataSource("kafka07").dataSourceCls().envVars())
    assert env == spark.sparkContext.environment


def test_an_unknown_name_is_not_registered(spark: SparkSession) -> None:
    assert not _registered(spark, "kafka07-no-such-source")


@pytest.mark.skipif(_version_tuple(pyspark.__version__) < (4, 1),
                    reason="Spark 4.0 does not redact plan texts by a pattern set on the "
                           "session (docs/running.md, Spark versions)")
def test_register_sets_the_statement_redaction_pattern_unless_one_is_set(
    spark: SparkSession,
) -> None:
    """Spark redacts SQL and Spark Connect statement texts only with this pattern (unset by
    default); register sets it to hide a zk.auth.password's value there, and keeps a user's."""
    from kafka_pyspark._cluster.zk_auth import PASSWORD_STATEMENT_REGEX, STATEMENT_REDACTION_CONF

    spark.conf.unset(STATEMENT_REDACTION_CONF)
    register(spark)
    assert spark.conf.get(STATEMENT_REDACTION_CONF) == PASSWORD_STATEMENT_REGEX
    plan = spark.sql("SELECT 'zk.auth.password ''Pw-9'' here' AS x")._jdf.queryExecution()
    assert "Pw-9" not in plan.toString() and "*********(redacted) here" in plan.toString()
    try:
        spark.conf.set(STATEMENT_REDACTION_CONF, "(?i)mine")
        register(spark)
        assert spark.conf.get(STATEMENT_REDACTION_CONF) == "(?i)mine"
    finally:
        spark.conf.set(STATEMENT_REDACTION_CONF, PASSWORD_STATEMENT_REGEX)
