"""Methods gathered from elsewhere, named as the class the caller holds.

ContextBase is put together from mixins (`FeedbackMethods` and the other `*Methods`), and
the remote clients from request builders they share (serve/sdk_calls.py). Python names a
function in the TypeError of a bad call (an unknown keyword, a missing argument) by its
`__qualname__`, so `cb.feedback(id, lable="wrong")` said `FeedbackMethods.feedback() got
an unexpected keyword argument`, a class the caller never sees. These name them
`ContextBase.feedback`; the code (file, line, `co_qualname` in a traceback) is unchanged.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["named_as", "own_names"]

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])


def own_names(cls: C) -> C:
    """Name each public method `cls` takes from a base class (and what it wraps: a
    decorator's `__wrapped__`) `<cls>.<name>`. Only functions a base of `cls` defines
    are renamed: the mixins are `cls`'s alone."""
    bases = {base.__name__ for base in cls.__mro__}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        fn = attr.__func__ if isinstance(attr, staticmethod | classmethod) else attr
        while isinstance(fn, types.FunctionType):
            owner, _, own = fn.__qualname__.rpartition(".")
            if owner not in bases or own != name:
                break
            fn.__qualname__ = f"{cls.__name__}.{name}"
            fn = getattr(fn, "__wrapped__", None)
    return cls


def named_as(fn: F, owner: str) -> F:
    """A copy of `fn` named `<owner>.<its name>`: for a function two classes share (the
    sync and async clients' request builders), which each then names as its own."""
    assert isinstance(fn, types.FunctionType)
    copy = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__doc__ = fn.__doc__
    copy.__module__ = fn.__module__
    copy.__annotations__ = fn.__annotations__
    copy.__dict__.update(fn.__dict__)
    copy.__qualname__ = f"{owner}.{fn.__name__}"
    out: F = copy  # type: ignore[assignment]
    return out
