"""Import the optional server dependencies with an error that says how to install them."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["INSTALL_HINT", "require"]

INSTALL_HINT = "pip install 'ctxbase[server]'"


def require(module: str) -> ModuleType:
    """Import `module` (fastapi, uvicorn, httpx) or explain which extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"the ctxbase service and SDK need {module!r}, which is not installed: {INSTALL_HINT}"
        ) from exc
