"""Prefect's deployment concurrency (a deployment's concurrency limit, its leases, its orchestration rules and its
repossessor) under dst: Prefect's own server and client code, from the package index (``pip install -e
".[prefect]"``). Name it with ``[model] impl = "examples.prefect_deployments:model"``."""

from .adapter import model

__all__ = ["model"]
