"""The REST service and the remote SDK. Nothing is imported until used, so `import ctxbase`
never needs the server extras (pip install 'ctxbase[server]').

    ctxbase serve --db memory.db            # the service (serve.server.run_server)
    cb = ctxbase.connect("http://127.0.0.1:8765", api_key="cb_...")   # serve.sdk.Client
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sdk import AsyncClient, Client, connect, connect_async
    from .server import run_server

__all__ = ["LOOPBACK_HOST", "AsyncClient", "Client", "connect", "connect_async", "run_server"]

# Where a server listens unless told otherwise, and the only address `--no-auth` allows
# (here, not in settings, so the command line's help reads it without pydantic).
LOOPBACK_HOST = "127.0.0.1"


def __getattr__(name: str) -> Any:
    if name in ("AsyncClient", "Client", "connect", "connect_async"):
        from . import sdk

        return getattr(sdk, name)
    if name == "run_server":
        from .server import run_server

        return run_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
