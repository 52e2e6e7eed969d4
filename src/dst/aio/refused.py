"""What the simulated loop refuses: the asyncio methods that would reach something real (sockets, subprocesses,
signals, other threads). Each is refused in one line that names the call and the user's line that made it."""

from __future__ import annotations

from typing import Any, Callable

from ..sandbox import _EXECUTOR, _PROCESSES, _SIGNALS, _SOCKETS


# What a simulated run cannot have: the loop's method -> what to use instead. Each is refused in one line that
# names the call and the user's line that made it, and the run ends with it (even if the caller swallows it).
_REFUSED: dict[str, tuple[bool, str]] = {  # name -> (a coroutine method, what to use instead)
    "call_soon_threadsafe": (False, "no other thread runs here; use loop.call_soon"),
    "set_default_executor": (False, _EXECUTOR),
    "add_signal_handler": (False, _SIGNALS),
    "add_reader": (False, _SOCKETS), "add_writer": (False, _SOCKETS),
    **{name: (True, _SOCKETS) for name in (
        "getaddrinfo", "getnameinfo", "create_connection", "create_server", "create_datagram_endpoint",
        "create_unix_connection", "create_unix_server", "sock_connect", "sock_recv", "sock_recv_into",
        "sock_recvfrom", "sock_sendall", "sock_sendto", "sock_accept", "sock_sendfile", "sendfile", "start_tls",
        "connect_accepted_socket", "connect_read_pipe", "connect_write_pipe")},
    "subprocess_exec": (True, _PROCESSES), "subprocess_shell": (True, _PROCESSES),
}


def _refusing(name: str, is_coroutine: bool, instead: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._refused(f"loop.{name}()", instead)

    async def refuse_awaited(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._refused(f"loop.{name}()", instead)

    chosen = refuse_awaited if is_coroutine else refuse
    chosen.__name__ = name
    return chosen


def refuse_the_real(loop_class: type) -> None:
    """Give the loop's class a refusing method for each of :data:`_REFUSED`; removing a reader, a writer or a
    signal handler that could never have been added does nothing."""
    for name, (awaited, instead) in _REFUSED.items():
        setattr(loop_class, name, _refusing(name, awaited, instead))
    for name in ("remove_reader", "remove_writer", "remove_signal_handler"):
        setattr(loop_class, name, _nothing)


def _nothing(self: Any, *args: Any) -> bool:
    return False
