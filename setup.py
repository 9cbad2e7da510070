"""The build of the compiled modules, all of it: which modules, their sources, one list of
compile flags. Everything else about the package is in pyproject.toml.

Every module is optional: a build without a C compiler (or without libdeflate for the two that
link it) leaves it out, and the package runs its pure-Python twin with the same results
(``kafka_pyspark/_shared/native.py``). ``KAFKA_PYSPARK_PURE_BUILD=1`` builds the pure-Python wheel
(``py3-none-any``): no compiled file at all, tagged for every platform.
"""

import os

from setuptools import Distribution, Extension, setup

PURE_BUILD_ENV = "KAFKA_PYSPARK_PURE_BUILD"

COMPILE_FLAGS = [
    "-O3", "-std=c99", "-Wall", "-Wextra", "-Wno-unused-parameter",
    "-Werror=implicit-function-declaration",
]
# libdeflate linked statically (libdeflate-dev is needed to build, nothing at run time); its
# symbols stay inside the module
LIBDEFLATE = {"libraries": [":libdeflate.a"], "extra_link_args": ["-Wl,--exclude-libs,ALL"]}
MESSAGES = "kafka_pyspark/_messages/"


def _module(
    name: str, sources: list[str], depends: tuple[str, ...] | list[str] = (), **link: list[str]
) -> Extension:
    return Extension(name, sources=sources, depends=list(depends),
                     extra_compile_args=COMPILE_FLAGS, optional=True, **link)


EXTENSIONS = [
    # the decode kernel (_messages/walk.py) and the snappy lane (flat.py)
    _module("kafka_pyspark._messages._kernel",
            [MESSAGES + f for f in ("_module.c", "_kernel.c", "_zeros.c", "_snappy.c", "_wrappers.c")],
            [MESSAGES + "_kernel.h"]),
    # the gzip lane (flat.py): gzip wrappers inflated by libdeflate; without it gzip sets take
    # the ISA-L path
    _module("kafka_pyspark._messages._gzip", [MESSAGES + "_gzip.c"], [MESSAGES + "_kernel.h"],
            **LIBDEFLATE),
    # the encode pass (encode.py): message sets from Arrow columns, our snappy compressor,
    # libdeflate's deflate
    _module("kafka_pyspark._messages._encode",
            [MESSAGES + f for f in ("_encode.c", "_frame.c", "_zeros.c", "_snapenc.c")],
            [MESSAGES + f for f in ("_kernel.h", "_frame.h", "_snapenc.h")], **LIBDEFLATE),
    # the record walk of v2 record batches (_formats/records.py)
    _module("kafka_pyspark._formats._v2kernel", ["kafka_pyspark/_formats/_v2kernel.c"]),
]


class PureDistribution(Distribution):
    """No extension modules: ``build_ext`` does not run and the wheel is pure."""

    def has_ext_modules(self) -> bool:
        return False


if os.environ.get(PURE_BUILD_ENV, "") not in ("", "0"):
    setup(distclass=PureDistribution)
else:
    setup(ext_modules=EXTENSIONS)
