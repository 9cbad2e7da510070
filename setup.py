"""Build hook: ``KAFKA_PYSPARK_PURE_BUILD=1`` builds the pure-Python wheel (``py3-none-any``).

Everything else about the build is in pyproject.toml. The compiled kernels are optional
there; a pure build leaves them out entirely, so that the wheel holds no compiled file and is
tagged for every platform (the package then runs its pure-Python paths, with the same
results: ``kafka_pyspark/_shared/native.py``).
"""

import os

from setuptools import Distribution, setup

PURE_BUILD_ENV = "KAFKA_PYSPARK_PURE_BUILD"


class PureDistribution(Distribution):
    """No extension modules: ``build_ext`` does not run and the wheel is pure."""

    def has_ext_modules(self) -> bool:
        return False


if os.environ.get(PURE_BUILD_ENV, "") not in ("", "0"):
    setup(distclass=PureDistribution)
else:
    setup()
