"""``python -m kafka_pyspark.cli``: the same as the ``kafka07`` command."""

import sys

from kafka_pyspark.cli import main

sys.exit(main())
