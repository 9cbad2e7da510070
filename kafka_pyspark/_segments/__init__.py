"""Reading Kafka log segment files directly (no broker): discovery, planning, reading."""
