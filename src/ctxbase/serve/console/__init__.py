"""The web console at /ui: static pages (HTML, ES modules, CSS, shipped in the package, no
CDN) that read the REST API with the caller's key, plus the few read endpoints they need
(api.py). `mount_console(app)` adds both to the service."""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from ..query_params import reject_unknown_query
from .api import router

__all__ = ["STATIC_DIR", "mount_console"]

STATIC_DIR = Path(__file__).parent / "static"

# The page loads only its own files; whatever an agent wrote is shown as text, never run.
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def mount_console(app: FastAPI) -> None:
    """Serve the console at /ui (no key needed for the page itself: it holds no data)."""
    # its read endpoints refuse a mistyped query parameter, as the API's own do
    app.include_router(router, dependencies=[Depends(reject_unknown_query)])

    # A browser pointed at the server root lands on the console, not on a JSON 404.
    @app.get("/", include_in_schema=False)
    async def server_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/ui", include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/ui/", include_in_schema=False)
    async def console_page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=_HEADERS)

    app.mount("/ui/assets", StaticFiles(directory=STATIC_DIR), name="console-assets")
