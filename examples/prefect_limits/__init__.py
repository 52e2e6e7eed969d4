"""Prefect's global concurrency limits (v2) with leases under dst: Prefect's own server and client code, from the
package index (``pip install -e ".[prefect]"``). Name it with ``[model] impl = "examples.prefect_limits:model"``."""

from .adapter import model

__all__ = ["model"]
