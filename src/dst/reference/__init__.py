"""The reference lease/slot model, behind the same public seam (:mod:`dst.sut`) a user's model uses.

``model`` is what a scenario's ``[model] impl = "dst.reference:model"`` names (the default).
A user's service that speaks the reference protocol (:mod:`dst.reference.protocol`) can reuse
its client program (:func:`lease_job`) and its fenced resource (:class:`FencedResource`).
"""

from __future__ import annotations

from .client import lease_job
from .model import ReferenceOptions, build, model
from .resource import FencedResource

__all__ = ["FencedResource", "ReferenceOptions", "build", "lease_job", "model"]
