"""Benchmarks run by ``make bench`` (``python -m bench``); results go to bench-results.json.

Every module ``bench/<name>.py`` with a ``run(recorder: bench.results.Recorder) -> None``
function is discovered and run (in name order) by ``python -m bench``; ``python -m bench
decode`` runs only ``bench/decode.py``. Record rows with ``recorder.record(...)``.
"""
