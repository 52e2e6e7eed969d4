"""A concurrency-limit service on a real PostgreSQL, through its own asyncpg, under dst (docs/postgres.md)."""

from .adapter import model

__all__ = ["model"]
