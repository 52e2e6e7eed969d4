"""The reference lease/slot model, behind the same public seam (:mod:`dst.sut`) a user's model uses.

``model`` is what a scenario's ``[model] impl = "dst.reference:model"`` names (the default).
A user's service that speaks the reference protocol (:mod:`dst.reference.protocol`) can reuse
its client program (:class:`dst.reference.client.LeaseClient`) and fenced resource.
"""

from __future__ import annotations

from .model import ReferenceOptions, build, model

__all__ = ["ReferenceOptions", "build", "model"]
