"""PostgreSQL as a real store under simulation: a real server's database behind the service's own asyncpg."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .install import installed

if TYPE_CHECKING:
    from .server import Server as Server

__all__ = ["Server", "installed", "unavailable"]


def unavailable() -> str | None:
    """Why no PostgreSQL server can start here (None: one runs, started now if it was not)."""
    from .embedded import unavailable as why

    return why()


def __getattr__(name: str) -> Any:
    if name == "Server":  # the server starts only for an adapter that makes one
        from .server import Server

        return Server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
