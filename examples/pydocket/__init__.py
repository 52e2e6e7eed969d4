"""pydocket, from the package index, unmodified, under dst: a Redis-stream task queue whose redelivery races dst
finds (docs/pydocket.md)."""

from .adapter import model

__all__ = ["model"]
