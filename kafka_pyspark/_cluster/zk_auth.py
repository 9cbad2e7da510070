"""ZooKeeper credentials: every form they take, parsed here and never shown.

Kafka 0.7 clusters protect their ZooKeeper nodes with digest ACLs (zkCli's ``addauth digest
user:password``); the registry (:mod:`kafka_pyspark._cluster.registry`) hands kazoo the pair
``("digest", "user:password")`` that every function here returns.

Where credentials come from:

* Spark options ``zk.auth.user`` + ``zk.auth.password`` (:func:`credentials_from_options`).
  The password's option name matches Spark's default ``spark.redaction.regex``
  (``(?i)secret|password|token|access[.]?key``), so Spark redacts its value wherever it shows
  options (plans, the UI's SQL tab, the event log). The former single option ``zk.auth`` is
  refused: its name matches no redaction pattern, so Spark would show its value in clear.
* The ``kafka07`` command: a file (:func:`credentials_from_file`) or the environment variable
  :data:`ZK_AUTH_ENV` (:func:`credentials_from_environment`), never a command-line argument
  (those are visible to every user of the machine). Both hold one line ``user:password`` or
  ``digest:user:password`` (:func:`credentials_from_text`).

The password is a secret: errors describe what is wrong and never quote it, and kazoo's own
log, which prints its ``Auth`` request in clear at debug level, goes through :data:`KAZOO_LOG`,
whose filter rewrites that line.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping

from kafka_pyspark.errors import CredentialsError, OptionError

__all__ = [
    "CREDENTIALS_HINT",
    "KAZOO_LOG",
    "PASSWORD_STATEMENT_REGEX",
    "STATEMENT_REDACTION_CONF",
    "ZK_AUTH_ENV",
    "ZK_AUTH_OPTIONS",
    "ZK_AUTH_PASSWORD",
    "ZK_AUTH_REFUSED",
    "ZK_AUTH_SCHEME",
    "ZK_AUTH_USER",
    "credentials_from_environment",
    "credentials_from_file",
    "credentials_from_options",
    "credentials_from_text",
    "refuse_zk_auth",
]

#: the one ZooKeeper auth scheme 0.7 deployments use (zkCli's ``addauth digest user:password``)
ZK_AUTH_SCHEME = "digest"
#: the Spark options that carry the credentials (the password's name is redacted by Spark)
ZK_AUTH_USER = "zk.auth.user"
ZK_AUTH_PASSWORD = "zk.auth.password"
ZK_AUTH_OPTIONS = (ZK_AUTH_USER, ZK_AUTH_PASSWORD)
#: the former option, refused: Spark shows its value in clear
ZK_AUTH_REFUSED = "zk.auth"
#: Spark's SQL conf that redacts statement texts (unset by default): Spark Connect shows each
#: client plan as text (the UI's Connect tab, the event log's ``statementText``), and SQL
#: statements are shown as typed; option maps are redacted by name, these texts are not
STATEMENT_REDACTION_CONF = "spark.sql.redaction.string.regex"
#: what :data:`STATEMENT_REDACTION_CONF` needs to hide the password in those texts: the quoted
#: value after ``zk.auth.password``, as a Connect plan prints an option (``key:
#: "zk.auth.password" value: "..."``) and as SQL takes it (``'...'``, ``"..."``, ``r'...'``,
#: with or without ``=``), also inside a Connect plan's text of a SQL statement, where quotes,
#: backslashes and line breaks are escaped (``\'...\'``, ``\"...\"``, ``\n``)
PASSWORD_STATEMENT_REGEX = (
    r"""(?i)zk\.auth\.password[\\`'"]*(?:\s|\\[nrt])*(?:=|value:)?(?:\s|\\[nrt])*r?"""
    r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"""
    r"""|\\"(?:\\\\\\.|\\[^"]|[^\\])*\\"|\\'(?:\\\\\\.|\\[^']|[^\\])*\\')"""
)
#: the ``kafka07`` command's environment variable (``user:password`` or ``digest:user:password``)
ZK_AUTH_ENV = "KAFKA07_ZK_AUTH"

#: how to give credentials, for errors of sessions that had none
CREDENTIALS_HINT = (
    f"options {ZK_AUTH_USER} + {ZK_AUTH_PASSWORD}; kafka07: --zk-auth-file or {ZK_AUTH_ENV}"
)
#: a credentials file is one short line; anything longer is not one (and /dev/zero ends here)
_MAX_FILE_BYTES = 64 * 1024
_NOT_SHOWN = "the value is not shown, it is a secret"
_TEXT_FORMAT = "one line 'user:password' or 'digest:user:password'"


def credentials_from_options(options: Mapping[str, str]) -> tuple[str, str] | None:
    """``zk.auth.user`` + ``zk.auth.password`` (lower-cased option names) -> ``("digest",
    "user:password")``; None when neither is given.

    Raises :class:`OptionError` for ``zk.auth`` (refused), one of the two without the other,
    an empty user or password, or a user holding ``':'``. No error quotes the password.
    """
    refuse_zk_auth(options)
    user = options.get(ZK_AUTH_USER)
    password = options.get(ZK_AUTH_PASSWORD)
    if user is None and password is None:
        return None
    if password is None:
        raise OptionError(ZK_AUTH_PASSWORD, f"is required with {ZK_AUTH_USER} (digest credentials)")
    if user is None:
        raise OptionError(ZK_AUTH_USER, f"is required with {ZK_AUTH_PASSWORD} (digest credentials)")
    if not password:
        raise OptionError(ZK_AUTH_PASSWORD, "is empty")
    problem = _user_problem(user)
    if problem:
        raise OptionError(ZK_AUTH_USER, problem)
    return ZK_AUTH_SCHEME, f"{user}:{password}"


def refuse_zk_auth(names: Iterable[str]) -> None:
    """The former option ``zk.auth`` among the (lower-cased) option ``names`` is an
    :class:`OptionError` that does not quote its value."""
    if ZK_AUTH_REFUSED in names:
        raise OptionError(
            ZK_AUTH_REFUSED,
            f"is not taken: Spark would show its value in its UI and event log ({_NOT_SHOWN}); "
            f"give the user in {ZK_AUTH_USER} and the password in {ZK_AUTH_PASSWORD}, "
            "whose value Spark redacts",
        )


def credentials_from_text(text: str, source: str) -> tuple[str, str]:
    """One line ``user:password`` or ``digest:user:password`` (surrounding whitespace
    stripped) -> ``("digest", "user:password")``.

    The user ends at the first ``':'`` (as ZooKeeper's digest provider splits it), the password
    is the rest. A line starting ``digest:`` with a second ``':'`` names the scheme: a user
    called ``digest`` whose password holds a ``':'`` must be written ``digest:digest:...``.
    ``source`` says where the text came from (``"file /etc/k07.auth"``) for errors, which
    never quote the text. Raises :class:`CredentialsError`.
    """
    line = text.strip()
    if not line:
        raise CredentialsError(source, f"is empty; expected {_TEXT_FORMAT}")
    if "\n" in line or "\r" in line:
        raise CredentialsError(source, f"holds more than one line; expected {_TEXT_FORMAT}")
    scheme, _, rest = line.partition(":")
    credential = rest if scheme.lower() == ZK_AUTH_SCHEME and ":" in rest else line
    user, sep, password = credential.partition(":")
    if not sep or not password:
        raise CredentialsError(
            source, f"has no password after the user's ':'; expected {_TEXT_FORMAT} ({_NOT_SHOWN})"
        )
    problem = _user_problem(user)
    if problem:
        raise CredentialsError(source, f"its user {problem}; expected {_TEXT_FORMAT}")
    return ZK_AUTH_SCHEME, credential


def credentials_from_file(path: str) -> tuple[str, str]:
    """The credentials in the file at ``path`` (see :func:`credentials_from_text`).

    Only a regular file of at most 64 KiB of UTF-8 is read (a FIFO or a device would block or
    never end). Raises :class:`CredentialsError` naming the file, never quoting its content.
    """
    source = f"file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise CredentialsError(source, f"cannot be opened: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CredentialsError(source, "is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(_MAX_FILE_BYTES + 1)
    except OSError as e:
        raise CredentialsError(source, f"cannot be read: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > _MAX_FILE_BYTES:
        raise CredentialsError(
            source, f"is longer than {_MAX_FILE_BYTES} bytes; expected {_TEXT_FORMAT}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CredentialsError(source, f"is not UTF-8 text; expected {_TEXT_FORMAT}") from None
    return credentials_from_text(text, source)


def credentials_from_environment(
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """The credentials in :data:`ZK_AUTH_ENV` (see :func:`credentials_from_text`); None when
    the variable is unset or empty."""
    value = (os.environ if environ is None else environ).get(ZK_AUTH_ENV, "")
    if not value.strip():
        return None
    return credentials_from_text(value, f"environment variable {ZK_AUTH_ENV}")


def _user_problem(user: str) -> str:
    """What is wrong with a digest user name ('' when nothing): the user is not a secret."""
    if not user:
        return "is empty"
    if ":" in user:
        return "holds ':' (a digest user ends at the first ':')"
    if user != user.strip() or any(not c.isprintable() for c in user):
        return f"{user!r} has surrounding whitespace or unprintable characters"
    return ""


class _HideCredentials(logging.Filter):
    """kazoo logs every request it sends at debug level, ``Auth(...)`` with its credentials
    in clear: such records are rewritten before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "Auth(" in record.getMessage():
            record.msg, record.args = "Sending request: Auth(<credentials not logged>)", ()
        return True


#: kazoo's log for every Registry session: kazoo's own messages, minus credentials
KAZOO_LOG = logging.getLogger("kafka_pyspark._cluster.registry.kazoo")
KAZOO_LOG.addFilter(_HideCredentials())
