"""Property-based requests from the OpenAPI schema (schemathesis): never a 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from live_server import Live, start

schemathesis = pytest.importorskip("schemathesis")


def test_no_operation_answers_5xx(tmp_path: Path) -> None:
    server = start(tmp_path)
    try:
        live = Live(server.url, server.settings.db, server)
        headers = {"Authorization": f"Bearer {live.key('*', role='admin')}"}
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
        failures: list[tuple[Any, ...]] = []
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 35
        for op in operations:

            @given(case=op.as_strategy())
            @settings(
                max_examples=30,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def probe(case: Any) -> None:
                response = case.call(base_url=server.url, headers=headers)
                if response.status_code >= 500:
                    failures.append((case.method, case.path, response.status_code, case.body))

            probe()
        assert failures == []
    finally:
        server.stop()
