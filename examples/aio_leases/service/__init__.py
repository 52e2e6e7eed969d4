"""A lease/slot service, written the way an asyncio developer writes one: FastAPI, aiosqlite, a reaper task.

Nothing in this package knows about dst. ``create_app(path)`` returns the ASGI app; ``LeaseClient`` is
its client library, on httpx.
"""

from .app import Settings, create_app
from .client import Lease, LeaseClient

__all__ = ["Lease", "LeaseClient", "Settings", "create_app"]
