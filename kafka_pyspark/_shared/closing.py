"""One context-manager mixin for the connector's resources (connections, sessions, servers)."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_T = TypeVar("_T", bound="Closing")
_S = TypeVar("_S", bound="Service")


class Closing:
    """``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out."""

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Service(Closing):
    """A server that ``with`` starts: ``with svc:`` calls ``svc.start()`` and returns its result."""

    def start(self: _S) -> _S:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start()
