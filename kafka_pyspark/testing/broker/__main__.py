"""``python -m kafka_pyspark.testing.broker``."""

import sys

from kafka_pyspark.testing.broker.cli import main

sys.exit(main())
