"""The remote SDK: `ctxbase.connect(url, api_key=...)` gives a `Client` with the methods of
the embedded `ctxbase.open(path)`, over HTTP; `ctxbase.connect_async` an `AsyncClient`.

Every request is retried on connection errors, 429 and 502-504 (with backoff, honouring
Retry-After): writes are idempotent (event ids assigned by the client before sending,
upserts), so a retry never writes twice. A queued `capture()` has `capture_timeout` for
all its attempts, not `timeout` each; a lifecycle move retried after its answer was lost
returns the session its first attempt moved. Server errors come back as the library's
exceptions (ValidationError with its field, NotFoundError, ConflictError, ...).
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..aliases import identity_source
from ..assemble.trace import AssembledContext, print_assembly_log
from ..errors import CtxbaseError, StorageError, ValidationError
from ..open_options import check_remote_options
from ..own_names import named_as
from ..process_owner import OpenedIn
from ..validation import check_positive_seconds
from .errors import RemoteError, exception_from_body
from .sdk_calls import Call, Calls

if TYPE_CHECKING:
    import httpx

    from .sdk_manager import AsyncRemoteContextManager, RemoteContextManager

__all__ = ["AsyncClient", "Client", "connect", "connect_async", "whoami"]

P = ParamSpec("P")
T = TypeVar("T")

_RETRY_STATUS = frozenset({429, 502, 503, 504})


def _httpx() -> Any:
    from ._deps import require

    return require("httpx")


def _identity(agent_id: str | None, api_key: str | None) -> str:
    """Who writes through this client: its agent id, else the API key's id."""
    from .keys import key_agent, parse_key

    parsed = parse_key(api_key) if api_key else None
    return identity_source(agent_id, key_agent(parsed[0]) if parsed else None)


def _event_agent(agent_id: str | None) -> str | None:
    """The agent of events that name none: the client's agent id (as embedded), else
    build_event's default, so both sides store the same event."""
    return agent_id.strip() if agent_id and agent_id.strip() else None


def _headers(api_key: str | None) -> dict[str, str]:
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


def _delay(attempt: int, backoff: float, response: httpx.Response | None) -> float:
    if response is not None:
        after = response.headers.get("retry-after")
        if after:
            try:
                return min(30.0, float(after))
            except ValueError:
                pass
    return backoff * (2.0**attempt) * (0.5 + random.random())


def _result(call: Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        raise exception_from_body(response.status_code, body)
    return call.parse(response.json() if response.content else None)


def _server_url(url: str) -> str:
    """The server's base URL; one without a scheme ("127.0.0.1:8765") is named at once."""
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise ValidationError("url", f"must start with http:// or https:// (got {url!r})")
    return url.rstrip("/")


def _sent(exc: Exception) -> bool:
    """Whether a request that failed so may have reached the server (it connected)."""
    http = _httpx()
    return not isinstance(exc, http.ConnectError | http.ConnectTimeout)


_CAPTURE_PATHS = ("/events", "/messages", "/flush")


def _closed(call: Call[Any]) -> CtxbaseError:
    """A call on a closed client: the class the embedded base raises once closed (a
    capture's CaptureError, any other call's StorageError), not httpx's RuntimeError."""
    if call.method == "POST" and any(p in call.path for p in _CAPTURE_PATHS):
        from ..capture.bus import CaptureError

        return CaptureError("the client is closed: open another with ctxbase.connect")
    return StorageError("the client is closed: open another with ctxbase.connect")


def _unreachable(url: str, exc: Exception, call: Call[Any] | None = None) -> CtxbaseError:
    """The server did not answer. A write whose request may have reached it (the
    connection was made, then it timed out or dropped) may have been done: the error says
    so, with the event id or key that makes sending it again safe."""
    message = f"cannot reach {url}: {exc}"
    sent = _sent(exc)
    body = call.body if call is not None and isinstance(call.body, dict) else {}
    key, eid = body.get("idempotency_key"), body.get("id")
    # an event write names itself (its id or key): a search or an assembly, POSTed too,
    # has nothing the server may have done that a resend would repeat
    if call is not None and call.method != "GET" and sent and (key or eid):
        message += "; the server may have done it before the answer was lost"
        if isinstance(key, str):
            message += f" (sending it again with idempotency_key={key!r} stores nothing twice)"
        elif isinstance(eid, str):
            message += (
                f" (event {eid!r}: sending it again with event_id={eid!r} stores nothing twice)"
            )
        return RemoteError("outcome_unknown", message, 0)
    return RemoteError("unreachable", message, 0)


class _Deadline:
    """The time a call has left: a queued capture's `capture_timeout` spans all its
    attempts and backoff sleeps, so a stalled server cannot hold the agent for
    (retries + 1) x timeout; other calls keep the per-attempt `timeout`."""

    def __init__(self, call: Call[Any], timeout: float, capture_timeout: float) -> None:
        self.timeout = timeout
        self.end = time.monotonic() + capture_timeout if call.queued else None

    def left(self) -> float | None:
        return None if self.end is None else self.end - time.monotonic()

    def attempt_timeout(self) -> float:
        left = self.left()
        return self.timeout if left is None else max(0.001, min(self.timeout, left))

    def sleep(self, delay: float) -> float | None:
        """The backoff to sleep, or None when the deadline leaves no time for another try."""
        left = self.left()
        if left is None:
            return delay
        return delay if delay < left else None


def _moved_already(call: Call[Any], response: httpx.Response, maybe_done: bool) -> bool:
    """A lifecycle move refused (409) on a retry after an attempt that may have made it
    (its answer lost): the record is read back, and if it holds the target status the move
    is done. A caller's own same-status move, on a first attempt, stays an error."""
    return maybe_done and response.status_code == 409 and call.read_back is not None


def _settled(call: Call[T], current: T, response: httpx.Response) -> T:
    if getattr(current, "status", None) == call.moves_to:
        return current
    return _result(call, response)


def _sync(build: Callable[Concatenate[Calls, P], Call[T]]) -> Callable[Concatenate[Client, P], T]:
    build = named_as(build, "Client")  # a bad call's TypeError names Client

    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(build(self._calls, *args, **kwargs))

    return method


def _async(
    build: Callable[Concatenate[Calls, P], Call[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    build = named_as(build, "AsyncClient")  # a bad call's TypeError names AsyncClient

    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(build(self._calls, *args, **kwargs))

    return method


class Client:
    """A context base on a ctxbase server; the same methods as the embedded ContextBase."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        project: str = "default",
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.1,
        capture_timeout: float = 5.0,
        agent_id: str | None = None,
        debug_mode: bool = False,
    ) -> None:
        httpx = _httpx()
        self.url = _server_url(url)
        self.project = project
        self.timeout = timeout
        self.capture_timeout = check_positive_seconds("capture_timeout", capture_timeout)
        self.retries = retries
        self.backoff = backoff
        self.agent_id = agent_id
        self.debug_mode = debug_mode
        self._calls = Calls(
            project,
            identity=_identity(agent_id, api_key),
            agent_id=_event_agent(agent_id),
        )
        self._headers = _headers(api_key)
        self._http = httpx.Client(base_url=self.url, headers=self._headers, timeout=timeout)
        self._opened_in = OpenedIn()
        self._transport_errors: tuple[type[Exception], ...] = (httpx.TransportError,)

    def _own_http(self) -> None:
        """In a process forked after the client was made, a connection pool of its own:
        the parent's kept-alive sockets are shared with the fork, and two processes reading
        one socket take each other's answers."""
        if self._opened_in.forked():
            closed = self._http.is_closed
            self._http = _httpx().Client(
                base_url=self.url, headers=self._headers, timeout=self.timeout
            )
            self._opened_in = OpenedIn()
            if closed:  # closed before the fork: closed here too
                self._http.close()

    def _run(self, call: Call[T]) -> T:
        self._own_http()
        if self._http.is_closed:
            raise _closed(call)
        deadline = _Deadline(call, self.timeout, self.capture_timeout)
        maybe_done = False  # an earlier attempt may have reached the server
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body,
                    timeout=deadline.attempt_timeout(),
                )
            except (TypeError, ValueError, RecursionError) as exc:  # the body, before sending
                raise call.refused(exc) from None
            except self._transport_errors as exc:
                maybe_done = maybe_done or _sent(exc)
                delay = deadline.sleep(_delay(attempt, self.backoff, None))
                if attempt >= self.retries or delay is None:
                    raise _unreachable(self.url, exc, call) from exc
            else:
                if call.read_back is not None and _moved_already(call, response, maybe_done):
                    return _settled(call, self._run(call.read_back), response)
                # a gateway that timed out or dropped the answer: the server may have done it
                maybe_done = maybe_done or response.status_code in (502, 504)
                delay = deadline.sleep(_delay(attempt, self.backoff, response))
                if (
                    response.status_code not in _RETRY_STATUS
                    or attempt >= self.retries
                    or delay is None
                ):
                    return _result(call, response)
            time.sleep(delay)
        raise AssertionError("unreachable")  # the loop always returns or raises

    def health(self) -> dict[str, Any]:
        """The server's /readyz answer."""
        self._own_http()
        response = self._http.get("/readyz")
        return dict(response.json())

    def close(self) -> None:
        if self._opened_in.forked():  # the parent's pool: its sockets are the parent's
            self._own_http()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    capture = _sync(Calls.capture)
    record = _sync(Calls.record)
    record_events = _sync(Calls.record_events)
    record_events_report = _sync(Calls.record_events_report)
    capture_messages = _sync(Calls.capture_messages)
    flush = _sync(Calls.flush)
    capture_stats = _sync(Calls.capture_stats)
    list_projects = _sync(Calls.list_projects)
    create_session = _sync(Calls.create_session)
    get_session = _sync(Calls.get_session)
    list_sessions = _sync(Calls.list_sessions)
    upsert_task = _sync(Calls.upsert_task)
    suspend_session = _sync(Calls.suspend_session)
    resume_session = _sync(Calls.resume_session)
    expire_session = _sync(Calls.expire_session)
    archive_session = _sync(Calls.archive_session)
    switch_task = _sync(Calls.switch_task)
    expire_message = _sync(Calls.expire_message)
    expire_idle_sessions = _sync(Calls.expire_idle_sessions)
    compact_archived = _sync(Calls.compact_archived)
    get_task = _sync(Calls.get_task)
    list_tasks = _sync(Calls.list_tasks)
    get_event = _sync(Calls.get_event)
    last_events = _sync(Calls.last_events)
    causal_chain = _sync(Calls.causal_chain)
    effects = _sync(Calls.effects)
    neighbourhood = _sync(Calls.neighbourhood)
    upsert_entity = _sync(Calls.upsert_entity)
    get_entity = _sync(Calls.get_entity)
    list_entities = _sync(Calls.list_entities)
    upsert_relationship = _sync(Calls.upsert_relationship)
    create_edge = upsert_relationship
    close_relationship = _sync(Calls.close_relationship)
    relationships = _sync(Calls.relationships)

    def wait_for_embeddings(
        self,
        timeout: float | None = None,
        *,
        progress: bool = False,
        warn: bool = True,
        project: str | None = None,
        all_projects: bool = False,
    ) -> bool:
        """As embedded: block until the server has a vector for every stored item, or
        `timeout` (seconds; None: no limit) passes, then False and a warning with the
        project's backlog (not with `warn=False`); `progress=True` shows the bar;
        `all_projects=True` waits for every project's (a key that sees every project)."""
        from ..embedding_wait import RemoteWait

        wait = RemoteWait(timeout, progress=progress, warn=warn)
        while True:
            step = self._calls.embeddings_wait_step(wait.step(), project, all_projects)
            done = wait.answer(self._run(step))
            if done is not None:
                return done

    search = _sync(Calls.search)
    _assemble = _sync(Calls.assemble_context)

    def assemble_context(self, /, **kwargs: Any) -> AssembledContext:
        """`Calls.assemble_context` (same keywords); with `debug_mode` the assembly log is
        printed too."""
        ctx = self._assemble(**kwargs)
        if self.debug_mode:
            print_assembly_log(ctx)
        return ctx

    def context_manager(self, **options: Any) -> RemoteContextManager:
        """Seed 003's ContextManager over this server: the embedded manager's calls and
        signatures (options: `project`, `extract_facts`, `default_role`)."""
        from .sdk_manager import RemoteContextManager

        return RemoteContextManager(self, **options)

    get_trace = _sync(Calls.get_trace)
    record_outcome = _sync(Calls.record_outcome)
    set_fact = _sync(Calls.set_fact)
    get_facts = _sync(Calls.get_facts)
    fact_history = _sync(Calls.fact_history)
    rollback_fact = _sync(Calls.rollback_fact)
    delete_fact = _sync(Calls.delete_fact)
    soft_delete = _sync(Calls.soft_delete)
    restore = _sync(Calls.restore)
    set_hidden = _sync(Calls.set_hidden)
    forget = _sync(Calls.forget)
    purge_soft_deleted = _sync(Calls.purge_soft_deleted)
    tag_knowledge = _sync(Calls.tag_knowledge)
    knowledge_tags = _sync(Calls.knowledge_tags)
    pin_knowledge = _sync(Calls.pin_knowledge)
    unpin_knowledge = _sync(Calls.unpin_knowledge)
    feedback = _sync(Calls.feedback)
    get_feedback = _sync(Calls.get_feedback)
    feedback_history = _sync(Calls.feedback_history)


class AsyncClient:
    """The asyncio version of `Client`: the same methods, awaited."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        project: str = "default",
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.1,
        capture_timeout: float = 5.0,
        agent_id: str | None = None,
        debug_mode: bool = False,
    ) -> None:
        httpx = _httpx()
        self.url = _server_url(url)
        self.project = project
        self.timeout = timeout
        self.capture_timeout = check_positive_seconds("capture_timeout", capture_timeout)
        self.retries = retries
        self.backoff = backoff
        self.agent_id = agent_id
        self.debug_mode = debug_mode
        self._calls = Calls(
            project,
            identity=_identity(agent_id, api_key),
            agent_id=_event_agent(agent_id),
        )
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=_headers(api_key), timeout=timeout
        )
        self._transport_errors: tuple[type[Exception], ...] = (httpx.TransportError,)

    async def _run(self, call: Call[T]) -> T:
        if self._http.is_closed:
            raise _closed(call)
        deadline = _Deadline(call, self.timeout, self.capture_timeout)
        maybe_done = False  # an earlier attempt may have reached the server
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body,
                    timeout=deadline.attempt_timeout(),
                )
            except (TypeError, ValueError, RecursionError) as exc:  # the body, before sending
                raise call.refused(exc) from None
            except self._transport_errors as exc:
                maybe_done = maybe_done or _sent(exc)
                delay = deadline.sleep(_delay(attempt, self.backoff, None))
                if attempt >= self.retries or delay is None:
                    raise _unreachable(self.url, exc, call) from exc
            else:
                if call.read_back is not None and _moved_already(call, response, maybe_done):
                    return _settled(call, await self._run(call.read_back), response)
                # a gateway that timed out or dropped the answer: the server may have done it
                maybe_done = maybe_done or response.status_code in (502, 504)
                delay = deadline.sleep(_delay(attempt, self.backoff, response))
                if (
                    response.status_code not in _RETRY_STATUS
                    or attempt >= self.retries
                    or delay is None
                ):
                    return _result(call, response)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def health(self) -> dict[str, Any]:
        response = await self._http.get("/readyz")
        return dict(response.json())

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    capture = _async(Calls.capture)
    record = _async(Calls.record)
    record_events = _async(Calls.record_events)
    record_events_report = _async(Calls.record_events_report)
    capture_messages = _async(Calls.capture_messages)
    flush = _async(Calls.flush)
    capture_stats = _async(Calls.capture_stats)
    list_projects = _async(Calls.list_projects)
    create_session = _async(Calls.create_session)
    get_session = _async(Calls.get_session)
    list_sessions = _async(Calls.list_sessions)
    upsert_task = _async(Calls.upsert_task)
    suspend_session = _async(Calls.suspend_session)
    resume_session = _async(Calls.resume_session)
    expire_session = _async(Calls.expire_session)
    archive_session = _async(Calls.archive_session)
    switch_task = _async(Calls.switch_task)
    expire_message = _async(Calls.expire_message)
    expire_idle_sessions = _async(Calls.expire_idle_sessions)
    compact_archived = _async(Calls.compact_archived)
    get_task = _async(Calls.get_task)
    list_tasks = _async(Calls.list_tasks)
    get_event = _async(Calls.get_event)
    last_events = _async(Calls.last_events)
    causal_chain = _async(Calls.causal_chain)
    effects = _async(Calls.effects)
    neighbourhood = _async(Calls.neighbourhood)
    upsert_entity = _async(Calls.upsert_entity)
    get_entity = _async(Calls.get_entity)
    list_entities = _async(Calls.list_entities)
    upsert_relationship = _async(Calls.upsert_relationship)
    create_edge = upsert_relationship
    close_relationship = _async(Calls.close_relationship)
    relationships = _async(Calls.relationships)

    async def wait_for_embeddings(
        self,
        timeout: float | None = None,
        *,
        progress: bool = False,
        warn: bool = True,
        project: str | None = None,
        all_projects: bool = False,
    ) -> bool:
        """`Client.wait_for_embeddings`, awaited."""
        from ..embedding_wait import RemoteWait

        wait = RemoteWait(timeout, progress=progress, warn=warn)
        while True:
            step = self._calls.embeddings_wait_step(wait.step(), project, all_projects)
            done = wait.answer(await self._run(step))
            if done is not None:
                return done

    search = _async(Calls.search)
    _assemble = _async(Calls.assemble_context)

    async def assemble_context(self, /, **kwargs: Any) -> AssembledContext:
        """`Calls.assemble_context` (same keywords); with `debug_mode` the assembly log is
        printed too."""
        ctx = await self._assemble(**kwargs)
        if self.debug_mode:
            print_assembly_log(ctx)
        return ctx

    def context_manager(self, **options: Any) -> AsyncRemoteContextManager:
        """`Client.context_manager`, its methods awaited."""
        from .sdk_manager import AsyncRemoteContextManager

        return AsyncRemoteContextManager(self, **options)

    get_trace = _async(Calls.get_trace)
    record_outcome = _async(Calls.record_outcome)
    set_fact = _async(Calls.set_fact)
    get_facts = _async(Calls.get_facts)
    fact_history = _async(Calls.fact_history)
    rollback_fact = _async(Calls.rollback_fact)
    delete_fact = _async(Calls.delete_fact)
    soft_delete = _async(Calls.soft_delete)
    restore = _async(Calls.restore)
    set_hidden = _async(Calls.set_hidden)
    forget = _async(Calls.forget)
    purge_soft_deleted = _async(Calls.purge_soft_deleted)
    tag_knowledge = _async(Calls.tag_knowledge)
    knowledge_tags = _async(Calls.knowledge_tags)
    pin_knowledge = _async(Calls.pin_knowledge)
    unpin_knowledge = _async(Calls.unpin_knowledge)
    feedback = _async(Calls.feedback)
    get_feedback = _async(Calls.get_feedback)
    feedback_history = _async(Calls.feedback_history)


def key_projects(url: str, api_key: str | None, timeout: float = 30.0) -> list[str] | None:
    """The projects a key may use (GET /v1/whoami); None when it names none (every
    project, no key, or a key the server refuses: the first real call reports that)."""
    if not api_key:
        return None
    httpx = _httpx()
    url = _server_url(url)
    try:
        response = httpx.get(url + "/v1/whoami", headers=_headers(api_key), timeout=timeout)
    except httpx.TransportError as exc:  # the calls' own error, not httpx's
        raise _unreachable(url, exc) from exc
    if response.status_code != 200:
        return None
    projects = response.json().get("projects")
    return [str(p) for p in projects] if isinstance(projects, list) else None


def whoami(url: str, api_key: str | None, timeout: float = 30.0) -> dict[str, Any]:
    """The service's `GET /v1/whoami` for this key (key_id, role, projects), or the error
    that says why not: unreachable, the key refused (AuthenticationError), or a URL that
    does not answer as a ctxbase service (RemoteError naming the URL and the status)."""
    httpx = _httpx()
    url = _server_url(url)
    try:
        response = httpx.get(url + "/v1/whoami", headers=_headers(api_key), timeout=timeout)
    except httpx.TransportError as exc:
        raise _unreachable(url, exc) from exc
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if response.status_code == 200 and isinstance(body, dict) and "role" in body:
        return body
    # the service's own error (a refused key, 429), but not a 404: the service always has
    # /v1/whoami, so that is another server, or a path under the service's
    served = isinstance(body, dict) and isinstance(body.get("error"), dict)
    if served and response.status_code != 404:
        raise exception_from_body(response.status_code, body)
    raise RemoteError(
        "not_ctxbase",
        f"{url} does not answer as a ctxbase service (GET /v1/whoami: HTTP "
        f"{response.status_code}); give the URL `ctxbase serve` prints",
        response.status_code,
    )


def key_project(url: str, api_key: str | None, timeout: float = 30.0) -> str:
    """The project a key is for when it names exactly one, else "default"."""
    projects = key_projects(url, api_key, timeout)
    return projects[0] if projects is not None and len(projects) == 1 else "default"


def connect(
    url: str, *, api_key: str | None = None, project: str | None = None, **options: Any
) -> Client:
    """A remote context base: `ctxbase.connect("http://host:8765", api_key="cb_...")`; with
    no `project`, the key's own project when it has exactly one. An option only the server
    sets (`chunking=`, `embedder=`, ...) is a ValidationError naming it (open_options)."""
    check_remote_options(options)
    if project is None:
        project = key_project(url, api_key, options.get("timeout", 30.0))
    return Client(url, api_key=api_key, project=project, **options)


def connect_async(
    url: str, *, api_key: str | None = None, project: str | None = None, **options: Any
) -> AsyncClient:
    """As `connect` (the key's project is looked up once, before the client is made)."""
    check_remote_options(options)
    if project is None:
        project = key_project(url, api_key, options.get("timeout", 30.0))
    return AsyncClient(url, api_key=api_key, project=project, **options)
