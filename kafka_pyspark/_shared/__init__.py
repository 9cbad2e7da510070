"""The small helpers every layer shares: ``defaults`` (every default and limit, defined
once), ``option_values`` (the value parsers every option parser uses), ``partition_key`` (the
``brokerId-partition`` key and group ids), ``closing`` (context-manager base classes) and
``native`` (loading the optional compiled kernels; ``KAFKA_PYSPARK_PURE``).

It imports nothing above :mod:`kafka_pyspark.errors` and ``_wire``; import its modules
directly.
"""
