"""The Spark DataSource "kafka07": options, planning, batch/stream readers, writers."""
