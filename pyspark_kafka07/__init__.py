"""Auto-registration: Spark 4 registers ``DefaultSource`` of installed ``pyspark_*`` modules."""

from kafka_pyspark._spark.source import Kafka07DataSource as DefaultSource

__all__ = ["DefaultSource"]
