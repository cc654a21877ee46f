"""The service's JSON logs go to stderr as it is when a record comes (serve/logs.py)."""

from __future__ import annotations

import contextlib
import io
import json
import logging

from ctxbase.serve.logs import configure_logging


def test_records_follow_a_swapped_stderr_and_a_closed_one_is_never_written() -> None:
    configure_logging("info")  # the conftest puts the logger back after the test
    log = logging.getLogger("ctxbase.serve")
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(first):
        log.info("one")
    first.close()  # a harness closing what it captured
    with contextlib.redirect_stderr(second):
        log.info("two")
    assert json.loads(second.getvalue())["msg"] == "two"
