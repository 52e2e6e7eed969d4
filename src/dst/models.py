"""Finding the model a scenario names: ``"package.module:name"`` -> a :class:`dst.sut.Model`.

Only importable names, never file paths: importing the module runs its code, as any import does.
Names are looked up in the installed packages and then in the current directory, as ``python -m`` does.
The name may point at a :class:`~dst.sut.Model` or at a plain build function (a model with no
options and no bugs). Resolved models are cached per process.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any

from .errors import UserError
from .sut import Model

DEFAULT_IMPL = "dst.reference:model"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_cache: dict[str, Model[Any]] = {}


class ModelError(UserError):
    """The named model cannot be loaded or cannot run what was asked; ``str()`` is one line (exit 2)."""


def resolve(impl: str) -> Model[Any]:
    """The model named ``impl``; raises :class:`ModelError` with what went wrong, in one line."""
    found = _cache.get(impl)
    if found is not None:
        return found
    if not isinstance(impl, str) or not _NAME.match(impl):
        raise ModelError(f"expected an importable name such as 'package.module:model', got {impl!r}")
    module_name, attr = impl.split(":", 1)
    _look_in_the_current_directory()
    try:
        target: Any = importlib.import_module(module_name)
    except SystemExit as e:  # a module that ends the process as it is imported would end dst, silently
        raise ModelError(f"cannot import {module_name!r}: importing it called sys.exit({e.code!r}); a model's "
                         f"module must not exit when imported") from None
    except Exception as e:  # whatever the module's own code raised while importing
        raise ModelError(f"cannot import {module_name!r} ({type(e).__name__}: {_one_line(e)})") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ModelError(f"module {module_name!r} has no {attr!r}")
        target = getattr(target, part)
    if isinstance(target, Model):
        model: Model[Any] = target
    elif callable(target):
        model = Model(target)
    else:
        raise ModelError(f"{impl!r} is neither a dst.sut.Model nor a build function (got {type(target).__name__})")
    _cache[impl] = model
    return model


def name_of(model: Any) -> str:
    """The importable name of a model passed in as an object (``dst.run(..., model=obj)``): the
    module-level name it is bound to. A finding must name its model, so an object with no such
    name cannot be recorded."""
    if isinstance(model, str):
        return model
    for name, cached in _cache.items():
        if cached is model:
            return name
    target = model.build if isinstance(model, Model) else model
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    for attr, value in (vars(module).items() if module is not None else ()):
        if value is model:
            name = f"{module.__name__}:{attr}"  # type: ignore[union-attr]
            _cache[name] = model if isinstance(model, Model) else Model(model)
            return name
    raise ModelError(f"{model!r} has no importable name: bind it to a name at the top level of a module and "
                     f"pass 'package.module:name'")


def _look_in_the_current_directory() -> None:
    """Names resolve as ``python -m`` resolves them, from the current directory too (after the installed
    packages, so a local file cannot shadow one): ``impl = "adapters.mine:model"`` works from the project's root."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else "no message"
