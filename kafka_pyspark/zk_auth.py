"""ZooKeeper credentials (option ``zk.auth``): parsed once, never shown.

``zk.auth=digest:user:password`` is what zkCli's ``addauth digest user:password`` takes; the
registry (:mod:`kafka_pyspark.registry`) hands ``("digest", "user:password")`` to kazoo. The
value is a secret: parse errors describe it without quoting it, and kazoo's own log, which
prints its ``Auth`` request in clear at debug level, goes through :data:`KAZOO_LOG`, whose
filter rewrites that line.
"""

from __future__ import annotations

import logging

from kafka_pyspark.errors import OptionError

__all__ = ["KAZOO_LOG", "ZK_AUTH_SCHEMES", "parse_zk_auth"]


#: ``zk.auth`` schemes: ``digest`` (``user:password``, as zkCli's ``addauth digest``).
ZK_AUTH_SCHEMES = ("digest",)


def parse_zk_auth(value: str) -> tuple[str, str]:
    """``zk.auth`` = ``"digest:user:password"`` -> ``("digest", "user:password")``.

    The value is a secret: errors describe what is wrong with it and never quote it.
    """
    if not isinstance(value, str):
        raise OptionError("zk.auth", "must be a string 'digest:user:password'")
    scheme, _, credential = value.strip().partition(":")
    if scheme.lower() not in ZK_AUTH_SCHEMES:
        raise OptionError(
            "zk.auth",
            "must be 'digest:user:password' (the scheme before the first ':' is not "
            f"one of {', '.join(ZK_AUTH_SCHEMES)}; the value is not shown, it is a secret)",
        )
    user, sep, password = credential.partition(":")
    if not user or not sep or not password:
        raise OptionError(
            "zk.auth",
            "must be 'digest:user:password' with a non-empty user and password "
            "(the value is not shown, it is a secret)",
        )
    return scheme.lower(), credential


class _HideCredentials(logging.Filter):
    """kazoo logs every request it sends at debug level, ``Auth(...)`` with its credentials
    in clear: such records are rewritten before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "Auth(" in record.getMessage():
            record.msg, record.args = "Sending request: Auth(<credentials not logged>)", ()
        return True


#: kazoo's log for every Registry session: kazoo's own messages, minus credentials
KAZOO_LOG = logging.getLogger("kafka_pyspark.registry.kazoo")
KAZOO_LOG.addFilter(_HideCredentials())
