"""Package names loaded on first use (PEP 562), so importing a package stays cheap.

A package lists `name -> module` and installs the two functions this returns as its own
`__getattr__` and `__dir__`; the names stay in its `__all__` and in `TYPE_CHECKING` imports,
so type checkers still see them (and an unknown name stays an error).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: MutableMapping[str, Any], modules: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose globals are `namespace`: a name of
    `modules` is imported from `package.<module>` when first read, then kept in
    `namespace`, so later reads find it without these functions."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *modules})

    return __getattr__, __dir__
