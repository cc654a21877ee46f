"""`open(bus_config=...)`: a mapping becomes a BusConfig; anything wrong is refused at open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase, ValidationError
from ctxbase.capture.bus import BusConfig

Opener = Callable[..., ContextBase]


def test_a_mapping_becomes_the_bus_config_and_captures_work(open_base: Opener) -> None:
    cb = open_base(bus_config={"max_queue": 3, "aggregate_window_s": 0})
    assert cb._bus.config == BusConfig(max_queue=3, aggregate_window_s=0)
    ids = [cb.capture("user_message", session_id="s", text=f"m{i}") for i in range(10)]
    cb.flush()
    assert all(isinstance(i, str) for i in ids)
    assert len(cb.last_events("s", 50)) == 10


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"max_queu": 3}, "bus_config.max_queu", "unknown setting; valid ones are max_queue"),
        ({"max_queue": -1}, "bus_config.max_queue", "greater than 0"),
        ({"linger_s": "soon"}, "bus_config.linger_s", "'soon'"),
        # strict: not converted from a string or a bool
        ({"batch_size": "3"}, "bus_config.batch_size", "valid integer (got '3')"),
        ({"max_queue": True}, "bus_config.max_queue", "valid integer (got True)"),
        ({"max_queue": 2.0}, "bus_config.max_queue", "valid integer (got 2.0)"),
        ({"aggregate_window_s": True}, "bus_config.aggregate_window_s", "(got True)"),
        ({"linger_s": "0.1"}, "bus_config.linger_s", "valid number (got '0.1')"),
        ("nonsense", "bus_config", "not str"),
        (["max_queue", 3], "bus_config", "not list"),
    ],
)
def test_a_bad_bus_config_is_refused_at_open_naming_the_key(
    db_path: Path, open_base: Opener, spec: Any, field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as err:
        open_base(bus_config=spec)
    assert err.value.field == field
    assert words in err.value.message
    assert not db_path.exists()  # refused before the store was opened


def test_a_bus_config_refuses_negative_values_itself() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        BusConfig(batch_size=0)
