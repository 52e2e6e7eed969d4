"""What the network stores' drop-ins share: the servers a client's host and port name, and a connection's hook on
the process that opened it (it dies with that process)."""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

S = TypeVar("S")


class Servers(Generic[S]):
    """One store's servers of the run, by the host and port its clients dial (held weakly: a run's server goes
    with its run)."""

    def __init__(self) -> None:
        self._by_address: weakref.WeakValueDictionary[tuple[str, int], Any] = weakref.WeakValueDictionary()

    def add(self, host: str, port: int, server: S) -> None:
        self._by_address[(host, port)] = server

    def remove(self, host: str, port: int, server: S) -> None:
        if self._by_address.get((host, port)) is server:
            del self._by_address[(host, port)]

    def find(self, host: Any, port: Any) -> S | None:
        """The server a client's host and port name, if one of dst's does."""
        try:
            found: S | None = self._by_address.get((str(host), int(port)))
            return found
        except (TypeError, ValueError):
            return None


def forget_crash(crash_list: list[Any] | None, hook: Any) -> None:
    """Take a connection's ``hook`` off its process's crash list (``Process.on_crash``), if it is still there."""
    if crash_list is not None:
        try:
            crash_list.remove(hook)
        except ValueError:
            pass
