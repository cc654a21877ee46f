"""Input limits and the checks every write path shares (library, REST service, remote SDK).

Whatever passes these checks can be stored by both backends and read back through every
read path, including JSON responses: that is what the limits are for.

- text: valid Unicode (no lone surrogates), at most `MAX_TEXT_BYTES` per event (text + data);
- a search query or an assembly's user intent: at most `MAX_QUERY_CHARS` characters, so
  one request cannot cost minutes of tokenizing and embedding;
- an assembly's agent role: at most `MAX_ROLE_CHARS` characters on one line (no control,
  format or line-separator characters), as it is written into the system prompt;
- JSON values (event data and metadata, entity and relation properties, state values,
  session and task metadata): finite numbers only (no NaN / Infinity), nested at most
  `MAX_JSON_DEPTH` levels, at most `MAX_JSON_BYTES` once encoded;
- integers that reach a database column (versions, line numbers): signed 64-bit;
- floats that reach a database column (timestamps, confidences): finite;
- an event's time: epoch seconds from 1970-01-01 to 2200-01-01 UTC (`MIN_EVENT_TS`,
  `MAX_EVENT_TS`); a time in milliseconds (JavaScript's `Date.now()`) is refused saying so.

Rows written by older versions may break these rules; `loads_tolerant` and `cap_depth` keep
such rows readable (see `DEEP_JSON_PLACEHOLDER`).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

from .errors import ValidationError

__all__ = [
    "DEEP_JSON_PLACEHOLDER",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_EVENT_TS",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_QUERY_CHARS",
    "MAX_ROLE_CHARS",
    "MAX_TEXT_BYTES",
    "MESSAGE_SHAPES",
    "MIN_EVENT_TS",
    "MessageShape",
    "cap_depth",
    "check_entity_properties",
    "check_event_ts",
    "check_fact_key",
    "check_finite",
    "check_id_list",
    "check_int64",
    "check_item_filter",
    "check_json",
    "check_message_list",
    "check_message_shape",
    "check_name",
    "check_names",
    "check_positive_seconds",
    "check_query",
    "check_role",
    "check_text",
    "check_timeout",
    "constraint_words",
    "either",
    "fields_renamed",
    "first_line_break",
    "is_blank",
    "json_refusal",
    "loads_tolerant",
    "yes_or_no_for_a_number",
]

MAX_TEXT_BYTES = 1_000_000
# A question or a task description is a few hundred characters; a pasted page is not a query.
MAX_QUERY_CHARS = 8000
# A role is a name ("coder", "测试"); it goes into the system prompt ("You are the {role}
# agent"), so a paragraph there would be instructions, not a name.
MAX_ROLE_CHARS = 100
MAX_JSON_DEPTH = 64
MAX_JSON_BYTES = 1_000_000
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# What a message list is: left to the base to tell ("auto"), only new messages, or the
# session's history from its first message (ContextBase.capture_messages).
MessageShape = Literal["auto", "new", "history"]
MESSAGE_SHAPES: tuple[MessageShape, ...] = ("auto", "new", "history")
# An event's time, epoch seconds: 1970-01-01 to 2200-01-01 UTC. Outside it a time is a
# mistake (milliseconds, a sentinel) that would become a session's created_at and move
# its idle expiry and every time filter.
MIN_EVENT_TS = 0.0
MAX_EVENT_TS = 7_258_118_400.0
# A time too large by one of these factors that, divided, falls after 2000 (a recent time
# sent in the wrong unit) is refused naming the unit.
_TIME_UNITS = ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds"))
_UNIT_GUESS_FROM = 946_684_800.0  # 2000-01-01

# What a read shows in place of the part of an old row's JSON nested deeper than the limit.
DEEP_JSON_PLACEHOLDER = f"<nested deeper than {MAX_JSON_DEPTH} levels: not shown>"

# json.dumps(value, ensure_ascii=False) builds an encoder per call; these are reused.
# allow_nan=False: NaN and Infinity are not JSON; stored, they would come back as null.
_encode_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def check_text(field: str, value: Any) -> str | None:
    """Text must be valid Unicode; bytes are decoded as UTF-8 or refused."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(field, f"is not valid UTF-8 (byte {exc.start})") from exc
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string (got {type(value).__name__})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            field, f"is not valid UTF-8 (lone surrogate at character {exc.start})"
        ) from exc
    return value


def check_name(field: str, value: Any) -> str | None:
    """A name kept as text (an entity's type and name, a fact's key and scope, a role):
    valid Unicode without NUL. PostgreSQL text cannot hold NUL and SQLite can, so both
    backends refuse it alike, before anything is read or written."""
    text = check_text(field, value)
    if text is not None and "\x00" in text:
        raise ValidationError(
            field,
            f"holds a NUL character (U+0000) at {text.index(chr(0))}; a name cannot hold one",
        )
    return text


def check_names(field: str, values: Any) -> None:
    """Each of several names (a list or tuple; anything else is left to the caller)."""
    if isinstance(values, list | tuple):
        for i, value in enumerate(values):
            if isinstance(value, str):
                check_name(f"{field}[{i}]", value)


def check_id_list(field: str, values: Any) -> None:
    """A list of ids, never one string: a string is a sequence of its characters, and
    `forget(event_ids="ev_1")` would name "e", "v", "_" and "1"."""
    if isinstance(values, str | bytes):
        raise ValidationError(
            field, f"must be a list of ids, not one string (got {values!r}; pass [{values!r}])"
        )
    from .model import id_arg  # model imports no validation: no cycle

    for i, value in enumerate(values or ()):
        id_arg(f"{field}[{i}]", value)  # an Event where its id goes, a number, None
        if isinstance(value, str) and not value.strip():  # a mistake, not an unknown id
            raise ValidationError(f"{field}[{i}]", "is blank: name an id")


def is_blank(text: str | None) -> bool:
    """No text, or only whitespace: nothing to index or to match."""
    return text is None or not text.strip()


def check_finite(field: str, value: Any) -> float:
    """A float stored in a column: a real, finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"must be a number (got {type(value).__name__})")
    try:
        number = float(value)
    except OverflowError as exc:
        raise ValidationError(field, "is too large for a 64-bit float") from exc
    if not math.isfinite(number):
        raise ValidationError(field, f"must be a finite number (got {value!r})")
    return number


def check_timeout(field: str, value: Any) -> float | None:
    """A wait's limit in seconds: None (no limit) or a finite number >= 0. A negative or
    NaN limit would end the wait at once and read as done."""
    if value is None or (isinstance(value, float) and value == math.inf):
        return None  # no limit
    number = check_finite(field, value)
    if number < 0:
        raise ValidationError(field, f"must be 0 or more seconds, or None (got {value!r})")
    return number


def check_positive_seconds(field: str, value: Any) -> float:
    """A time limit that must pass before giving up: a number of seconds > 0 (not a bool,
    not NaN; inf is no limit)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0  # NaN is not > 0 either
    ):
        raise ValidationError(field, f"must be a positive number of seconds (got {value!r})")
    return float(value)


def check_message_list(messages: Any) -> None:
    """A chat message list: a list (or tuple) of message objects. One message given bare,
    or a string, is refused naming the fix, before any message is read."""
    if isinstance(messages, list | tuple):
        return
    got = type(messages).__name__
    hint = " (one message: wrap it in a list, [message])" if isinstance(messages, dict) else ""
    raise ValidationError("messages", f"must be a list of message objects (got {got}){hint}")


def check_message_shape(shape: Any) -> MessageShape:
    """What a message list is (`capture_messages`' `shape`): one of `MESSAGE_SHAPES`."""
    for known in MESSAGE_SHAPES:
        if shape == known and isinstance(shape, str):
            return known
    listed = ", ".join(repr(s) for s in MESSAGE_SHAPES)
    raise ValidationError("shape", f"must be one of {listed} (got {shape!r})")


def check_event_ts(field: str, value: Any) -> float:
    """An event's time: finite epoch seconds from 1970 to 2200 (`MIN_EVENT_TS` ..
    `MAX_EVENT_TS`); a value that is such a time in milliseconds (or micro-, nanoseconds)
    is refused saying so."""
    seconds = check_finite(field, value)
    if MIN_EVENT_TS <= seconds <= MAX_EVENT_TS:
        return seconds
    for factor, unit in _TIME_UNITS:
        if _UNIT_GUESS_FROM <= seconds / factor <= MAX_EVENT_TS:
            raise ValidationError(
                field,
                f"{value!r} looks like {unit}: times are epoch seconds "
                f"(divide by {factor:,.0f}: {seconds / factor!r})",
            )
    raise ValidationError(
        field,
        f"must be epoch seconds from 1970-01-01 to 2200-01-01 UTC "
        f"({MIN_EVENT_TS:.0f} to {MAX_EVENT_TS:.0f}; got {value!r})",
    )


def check_int64(field: str, value: Any) -> int:
    """An integer stored in a column: within signed 64 bits."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"must be an integer (got {type(value).__name__})")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValidationError(field, f"must be between {INT64_MIN} and {INT64_MAX}")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    """Whether containers nest deeper than `limit` (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return False


def json_refusal(field: str, exc: ValueError | TypeError) -> ValidationError:
    """What JSON encoding refused in `field`, said as the library says it."""
    if isinstance(exc, ValueError) and "out of range float" in str(exc).lower():
        return ValidationError(
            field, "must hold finite numbers only (NaN and Infinity are not JSON)"
        )
    return ValidationError(field, f"must be JSON-serialisable: {exc}")


def check_json(field: str, value: Any, max_bytes: int | None = MAX_JSON_BYTES) -> str:
    """A value stored as JSON: serialisable, finite numbers, valid Unicode, nested at most
    MAX_JSON_DEPTH levels and (unless `max_bytes` is None) at most `max_bytes` encoded.
    Returns the JSON text."""
    try:
        text = _encode_json(value)
    except RecursionError as exc:
        raise ValidationError(field, f"is nested deeper than {MAX_JSON_DEPTH} levels") from exc
    except (ValueError, TypeError) as exc:
        raise json_refusal(field, exc) from exc
    check_text(field, text)
    # Fewer brackets than the limit cannot nest deeper than it: the walk is rarely needed.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth_over(value, MAX_JSON_DEPTH):
        raise ValidationError(field, f"is nested deeper than {MAX_JSON_DEPTH} levels")
    # Characters are a lower bound of the bytes, a quarter of them an upper one.
    if max_bytes is not None and len(text) * 4 > max_bytes:
        size = len(text.encode("utf-8"))
        if size > max_bytes:
            raise ValidationError(field, f"is {size} bytes as JSON, over the limit of {max_bytes}")
    return text


def check_item_filter(flt: Any) -> None:
    """A search's ItemFilter: numbers that reach SQL are 64-bit integers and finite
    floats; the path prefix is valid Unicode."""
    for name in ("line_from", "line_to"):
        value = getattr(flt, name)
        if value is not None:
            check_int64(f"filters.{name}", value)
    for name in ("since", "until"):
        value = getattr(flt, name)
        if value is not None:
            check_finite(f"filters.{name}", value)
    if flt.path_prefix is not None:
        check_name("filters.path_prefix", flt.path_prefix)
    for name in ("session_ids", "agent_ids", "agent_roles", "types", "kinds", "owner_ids", "repos"):
        check_names(f"filters.{name}", getattr(flt, name))


def check_query(query: Any, filters: Any = None, field: str = "query") -> str:
    """A search's query (a non-empty string of valid Unicode, at most MAX_QUERY_CHARS
    characters) and its ItemFilter, if any. `field` names the input in the error (an
    assembly's "user_intent")."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError(field, "must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(
            field, f"is {len(query)} characters long, over the limit of {MAX_QUERY_CHARS}"
        )
    check_text(field, query)
    if filters is not None:
        check_item_filter(filters)
    return query


# Control (newline, tab, NUL), format (bidi overrides, zero-width) and line/paragraph
# separator characters: none belongs in a name, each can restyle or break the prompt line.
_NOT_IN_A_ROLE = frozenset({"Cc", "Cf", "Zl", "Zp"})


def check_role(role: Any, field: str = "agent_role") -> str:
    """An assembly's agent role: a non-blank string of valid Unicode, at most MAX_ROLE_CHARS
    characters, with no control, format or line-separator character."""
    if not isinstance(role, str) or not role.strip():
        raise ValidationError(field, "must be a non-empty string")
    if len(role) > MAX_ROLE_CHARS:
        raise ValidationError(
            field, f"is {len(role)} characters long, over the limit of {MAX_ROLE_CHARS}"
        )
    check_text(field, role)
    bad = next((ch for ch in role if unicodedata.category(ch) in _NOT_IN_A_ROLE), None)
    if bad is not None:
        raise ValidationError(
            field,
            f"holds the control character U+{ord(bad):04X} at {role.index(bad)}; a role is "
            "a name on one line (it is written into the system prompt)",
        )
    return role


# Control (newline, carriage return, escape, NUL) and line/paragraph separator characters:
# each can end a prompt line early or restyle a terminal.
_BREAKS_A_LINE = frozenset({"Cc", "Zl", "Zp"})


def first_line_break(text: str) -> int | None:
    """The index of the first control or line-separator character of `text`, or None."""
    return next(
        (i for i, ch in enumerate(text) if unicodedata.category(ch) in _BREAKS_A_LINE), None
    )


def check_fact_key(key: Any) -> str:
    """A fact's key: non-empty valid Unicode on one line (it is written into the prompt as
    "key: value"; a newline in it would start a line of its own)."""
    if not key or not isinstance(key, str):
        raise ValidationError("key", "a fact needs a non-empty key")
    check_name("key", key)
    at = first_line_break(key)
    if at is not None:
        raise ValidationError(
            "key",
            f"holds the control character U+{ord(key[at]):04X} at {at}; a fact key is a "
            "name on one line (it is written into the prompt)",
        )
    return key


def check_entity_properties(properties: dict[str, Any]) -> None:
    """Entity properties: JSON within the limits; the ones the index keeps as columns are
    numbers (or numeric strings) in range and strings."""
    check_json("properties", properties)
    for name in ("line_start", "line_end"):
        value = properties.get(name)
        if value is not None:
            try:
                number = int(value)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ValidationError(
                    f"properties.{name}", f"must be an integer (got {value!r})"
                ) from exc
            check_int64(f"properties.{name}", number)
    importance = properties.get("importance")
    if importance is not None:
        try:
            weight = float(importance)
        except (TypeError, ValueError) as exc:
            raise ValidationError("properties.importance", "must be a number") from exc
        if not 0.0 <= weight <= 1.0:
            raise ValidationError(
                "properties.importance", f"must be between 0 and 1 (got {importance!r})"
            )
    for name in ("path", "session_id", "agent_id"):
        value = properties.get(name)
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"properties.{name}", f"must be a string (got {value!r})")


def cap_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """`value` with whatever is nested deeper than `limit` replaced by DEEP_JSON_PLACEHOLDER
    (values within the limit come back unchanged, as the same object)."""
    if not _depth_over(value, limit):
        return value

    def cut(item: Any, depth: int) -> Any:
        if not isinstance(item, dict | list):
            return item
        if depth > limit:
            return DEEP_JSON_PLACEHOLDER
        if isinstance(item, dict):
            return {k: cut(v, depth + 1) for k, v in item.items()}
        return [cut(v, depth + 1) for v in item]

    return cut(value, 1)


def loads_tolerant(text: str | bytes) -> Any:
    """json.loads for stored rows: JSON nested deeper than the limit (written before the
    limit existed) comes back capped, not as an error on every read."""
    raw = text if isinstance(text, str) else bytes(text).decode("utf-8")
    if raw.count("[") + raw.count("{") <= MAX_JSON_DEPTH:
        return json.loads(raw)
    try:
        value = json.loads(raw)
    except RecursionError:
        return DEEP_JSON_PLACEHOLDER  # deeper than the decoder itself can go
    return cap_depth(value)


def either(field: str, native: Any, alias_field: str, alias: Any) -> Any:
    """The value of an input that has two names (a native one and a seed article's): the
    one given (None: neither); both given, differing, is refused naming both."""
    if native is not None and alias is not None and native != alias:
        raise ValidationError(alias_field, f"give either {field!r} or {alias_field!r}, not both")
    return native if native is not None else alias


# pydantic's bound checks, said as the library's own checks say them
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def constraint_words(err: Mapping[str, Any]) -> str | None:
    """One pydantic error of a bound, a choice or an empty string in the words the
    library's checks use ("must be >= 0 (got -1)", "must be one of 'task', 'session' or
    'user' (got 'galaxy')", "is blank"), so the REST service and the tools answer a mistake
    as the embedded library does; None for any other error (its own message stands)."""
    kind, ctx, value = err.get("type"), err.get("ctx") or {}, err.get("input")
    if kind in _BOUNDS and _BOUNDS[kind][1] in ctx:
        if isinstance(value, float) and math.isnan(value):  # no bound holds it
            return "must be a finite number (got nan)"
        sign, name = _BOUNDS[kind]
        return f"must be {sign} {ctx[name]} (got {value!r})"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return f"must be one of {ctx['expected']} (got {value!r})"
    if kind == "string_too_short" and isinstance(value, str) and not value.strip():
        return "is blank"
    return None


def yes_or_no_for_a_number(fields: Mapping[str, Any], data: Any) -> str | None:
    """The first key of `data` (a mapping about to be validated) holding a bool where its
    field (`fields`: a pydantic model's `model_fields`) takes none: JSON's `true` and YAML's
    `on` are no count or score, though pydantic's lax mode reads them as 1."""
    if not isinstance(data, Mapping):
        return None
    for name, value in data.items():
        field = fields.get(name)
        if isinstance(value, bool) and field is not None and not _takes_bool(field.annotation):
            return str(name)
    return None


@contextmanager
def fields_renamed(names: Mapping[str, str], *, by_list: bool = False) -> Iterator[None]:
    """A ValidationError raised inside (not a subclass: those carry more than a field)
    raised again with its field named as the caller wrote it (`names`: the library's
    field -> the caller's: a tool's argument, a command's option); `by_list`: a list
    item's field (`ids[2]`) is looked up by its list's name, the index dropped."""
    try:
        yield
    except ValidationError as exc:
        named = names.get(exc.field.split("[")[0] if by_list else exc.field)
        if named is None or type(exc) is not ValidationError:
            raise
        raise ValidationError(named, exc.message) from exc


def _takes_bool(annotation: Any) -> bool:
    """Whether a type admits a bool as written (bool, Any, or a union or container of it)."""
    if annotation is bool or annotation is Any:
        return True
    from typing import get_args

    return any(_takes_bool(arg) for arg in get_args(annotation))
