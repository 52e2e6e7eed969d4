"""An unmodified asyncio lease service under dst: the service in ``service/``, its adapter in ``adapter.py``.

Name it with ``[model] impl = "examples.aio_leases:model"`` (from the repository's root).
"""

from .adapter import model

__all__ = ["model"]
