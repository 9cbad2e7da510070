"""``python -m kafka_pyspark.testing.broker``."""

import sys

from kafka_pyspark.testing.broker._command_line import main

sys.exit(main())
