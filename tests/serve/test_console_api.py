"""The console's read endpoints over real HTTP (API keys on): a paged timeline, the causal
chain both ways, the entity graph, the list of contexts and their diff; and the page itself
served without a key, with its security headers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_seed import Docs, Seeded, seed_big_session, seed_docs_project, seed_project
from live_server import Live, start


@pytest.fixture(scope="module")
def docs_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Docs]:
    tmp = tmp_path_factory.mktemp("console-api")
    return tmp, seed_docs_project(str(tmp / "serve.db"), "docs")


@pytest.fixture(scope="module")
def seeded_live(docs_db: tuple[Path, Docs]) -> Iterator[tuple[Live, Seeded]]:
    tmp = docs_db[0]
    db = str(tmp / "serve.db")
    seeded = seed_project(db, "shop")
    seed_big_session(db, "big", "long", 450)
    server = start(tmp)
    try:
        yield Live(server.url, server.settings.db, server), seeded
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http(seeded_live: tuple[Live, Seeded]) -> Iterator[httpx.Client]:
    live, _ = seeded_live
    with live.client(live.key("shop", "big", role="read")) as client:
        yield client


@pytest.fixture(scope="module")
def seeded(seeded_live: tuple[Live, Seeded]) -> Seeded:
    return seeded_live[1]


def test_timeline_pages_forward_and_back(http: httpx.Client) -> None:
    first = http.get("/v1/projects/big/timeline", params={"session_id": "long", "limit": 200})
    assert first.status_code == 200, first.text
    body = first.json()
    assert [e["seq"] for e in body["events"]] == list(range(1, 201))
    assert (body["total"], body["has_before"], body["has_after"]) == (450, False, True)
    assert {c["agent_id"] for c in body["counts"]} == {"planner", "coder", "tester"}
    assert sum(c["count"] for c in body["counts"]) == 450
    nxt = http.get(
        "/v1/projects/big/timeline", params={"session_id": "long", "after_seq": 400}
    ).json()
    assert [e["seq"] for e in nxt["events"]] == list(range(401, 451))
    assert (nxt["has_before"], nxt["has_after"]) == (True, False)
    last = http.get(
        "/v1/projects/big/timeline",
        params={"session_id": "long", "before_seq": 2**62, "limit": 10},
    ).json()
    assert [e["seq"] for e in last["events"]] == list(range(441, 451))


def test_timeline_filters_by_agent_and_type(http: httpx.Client) -> None:
    got = http.get(
        "/v1/projects/big/timeline",
        params=[
            ("session_id", "long"),
            ("agent", "coder"),
            ("type", "assistant_message"),
            ("limit", "1000"),
        ],
    ).json()
    # agent i % 3 == 1 and type i % 4 == 1: i = 1, 13, 25, ... (every 12th)
    assert [e["seq"] - 1 for e in got["events"]] == list(range(1, 450, 12))
    assert got["total"] == len(got["events"])
    assert all(e["agent_id"] == "coder" for e in got["events"])


def test_timeline_errors_name_the_problem(http: httpx.Client) -> None:
    missing = http.get("/v1/projects/shop/timeline", params={"session_id": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    bad = http.get("/v1/projects/shop/timeline", params={"session_id": "s1", "limit": 0})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
    assert http.get("/v1/projects/shop/timeline").status_code == 422  # no session_id


def test_chain_goes_up_and_down(http: httpx.Client, seeded: Seeded) -> None:
    ev = seeded.events
    got = http.get(f"/v1/projects/shop/events/{ev['rows']}/chain").json()
    assert got["event"]["id"] == ev["rows"]
    assert [(c["event"]["id"], c["hops"]) for c in got["causes"]] == [
        (ev["sql"], 1),
        (ev["plan"], 2),
        (ev["ask"], 3),
    ]
    assert [(c["event"]["id"], c["hops"]) for c in got["effects"]] == [
        (ev["test"], 1),
        (ev["fix"], 2),
    ]
    assert got["truncated"] is False
    near = http.get(
        f"/v1/projects/shop/events/{ev['rows']}/chain", params={"depth": 1, "limit": 1}
    ).json()
    assert [c["event"]["id"] for c in near["causes"]] == [ev["sql"]]
    assert [c["event"]["id"] for c in near["effects"]] == [ev["test"]]
    cut = http.get(f"/v1/projects/shop/events/{ev['fix']}/chain", params={"limit": 2}).json()
    assert len(cut["causes"]) == 2 and cut["truncated"] is True
    assert http.get("/v1/projects/shop/events/ev_nope/chain").status_code == 404


def test_graph_shows_typed_nodes_and_edges(http: httpx.Client, seeded: Seeded) -> None:
    ent = seeded.entities
    got = http.get("/v1/projects/shop/graph").json()
    assert {n["id"]: n["type"] for n in got["nodes"]} == {
        ent["spec"]: "document",
        ent["req"]: "requirement",
        ent["code"]: "code",
        ent["test"]: "test_case",
    }
    edges = {(e["from_id"], e["type"], e["to_id"]): e for e in got["edges"]}
    follows = edges[(ent["code"], "FOLLOWS", ent["spec"])]
    assert (follows["confidence"], follows["source"]) == (0.9, "reviewer")
    assert len(edges) == 4
    assert got["relation_types"] == {
        "FOLLOWS": 1,
        "IMPLEMENTS": 1,
        "REFERENCES": 1,
        "VALIDATES": 1,
    }
    assert got["entity_types"]["code"] == 1 and got["truncated"] is False
    narrowed = http.get(
        "/v1/projects/shop/graph",
        params=[("entity_type", "code"), ("entity_type", "document")],
    ).json()
    assert {n["id"] for n in narrowed["nodes"]} == {ent["code"], ent["spec"]}
    assert [e["type"] for e in narrowed["edges"]] == ["FOLLOWS"]
    only = http.get("/v1/projects/shop/graph", params={"relation_type": "VALIDATES"}).json()
    assert [e["type"] for e in only["edges"]] == ["VALIDATES"]
    cut = http.get("/v1/projects/shop/graph", params={"limit": 2}).json()
    assert len(cut["nodes"]) == 2 and cut["truncated"] is True


def test_graph_focus_is_a_neighbourhood(http: httpx.Client, seeded: Seeded) -> None:
    ent = seeded.entities
    one = http.get("/v1/projects/shop/graph", params={"focus": ent["test"], "hops": 1}).json()
    assert {n["id"] for n in one["nodes"]} == {ent["test"], ent["code"]}
    two = http.get("/v1/projects/shop/graph", params={"focus": ent["test"], "hops": 2}).json()
    assert {n["id"] for n in two["nodes"]} == {ent["test"], ent["code"], ent["spec"], ent["req"]}
    nope = http.get("/v1/projects/shop/graph", params={"focus": "nope"})
    assert nope.status_code == 404  # a node is an event or an entity: named as both
    assert nope.json()["error"]["message"] == "no event or entity 'nope' in project 'shop'"
    # an entity's id is not found as an entity, not as an event
    missing = http.get("/v1/projects/shop/graph", params={"focus": "code:nonexistent"})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "entity 'code:nonexistent' not found"
    # an unknown project is named as such, not as a missing session
    lost = http.get("/v1/projects/no-such-project/timeline", params={"session_id": "s1"})
    assert lost.status_code == 404 and "no-such-project" in lost.json()["error"]["message"]
    assert "session" not in lost.json()["error"]["message"]


def test_contexts_list_and_diff(http: httpx.Client, seeded: Seeded) -> None:
    wide, narrow = seeded.contexts
    listed = http.get("/v1/projects/shop/contexts").json()
    assert [c["context_id"] for c in listed["contexts"]] == [narrow, wide]
    assert listed["next_before"] is None
    assert [c["agent_role"] for c in listed["contexts"]] == ["tester", "coder"]
    assert listed["contexts"][1]["intent"].startswith("缓存没生效")
    assert listed["contexts"][1]["total_tokens"] > 0
    paged = http.get("/v1/projects/shop/contexts", params={"limit": 1}).json()
    assert [c["context_id"] for c in paged["contexts"]] == [narrow]
    older = http.get(
        "/v1/projects/shop/contexts", params={"limit": 1, "before": paged["next_before"]}
    ).json()
    assert [c["context_id"] for c in older["contexts"]] == [wide]
    diff = http.get(
        "/v1/projects/shop/contexts/diff", params={"before_id": wide, "after_id": narrow}
    )
    assert diff.status_code == 200, diff.text
    d = diff.json()
    assert (d["before_id"], d["after_id"], d["policy"]) == (wide, narrow, ["coder", "tester"])
    assert d["is_empty"] is False
    # the system prompt stays whole at any budget: the roles' smaller budget shows in the
    # other layers
    assert all(t["delta"] == t["after"] - t["before"] for t in d["tokens"])
    assert any(t["delta"] != 0 for t in d["tokens"] if t["layer"] != "system")
    assert d["total_token_delta"] == sum(t["delta"] for t in d["tokens"])
    gone = http.get(
        "/v1/projects/shop/contexts/diff", params={"before_id": wide, "after_id": "ctx_nope"}
    )
    assert gone.status_code == 404


def test_timeline_counts_hidden_events(
    seeded_live: tuple[Live, Seeded], http: httpx.Client
) -> None:
    live, _ = seeded_live
    with live.client(live.key("docs", role="read")) as docs:
        got = docs.get("/v1/projects/docs/timeline", params={"session_id": "d1"}).json()
    assert [e["text"] for e in got["events"]] == ["整理订单API规范的目录"]
    assert (got["total"], got["hidden"]) == (1, 1)
    assert http.get("/v1/projects/shop/timeline", params={"session_id": "s1"}).json()["hidden"] == 0


def test_a_context_trace_names_what_was_dropped(
    seeded_live: tuple[Live, Seeded], docs_db: tuple[Path, Docs], http: httpx.Client
) -> None:
    live, seeded = seeded_live
    docs = docs_db[1]
    with live.client(live.key("docs", role="read")) as client:
        got = client.get(f"/v1/projects/docs/contexts/{docs.context}")
        assert got.status_code == 200, got.text
        plain = client.get(f"/v1/traces/{docs.context}").json()
    trace = got.json()
    dropped = trace["dropped"]
    assert {d["reason"] for d in dropped} == {"off topic"}
    texts = {d["id"]: d.get("text") for d in dropped}
    query = docs.entities["query"]
    assert texts[query] == "shop.orders.query_orders: def query_orders(user_id): ..."
    # hidden since: masked like the rest of its entry, its text included
    assert texts["[hidden]"] == "[hidden]" and docs.hidden_event not in str(trace)
    assert all(texts.values())
    # the rest is the trace GET /v1/traces answers
    assert {k: v for k, v in trace.items() if k != "dropped"} == {
        k: v for k, v in plain.items() if k != "dropped"
    }
    assert [{k: v for k, v in d.items() if k != "text"} for d in dropped] == plain["dropped"]
    # events dropped show their text too
    wide = http.get(f"/v1/projects/shop/contexts/{seeded.contexts[0]}").json()
    assert all(d.get("text") for d in wide["dropped"] if d["id"].startswith("ev_"))
    assert http.get("/v1/projects/shop/contexts/ctx_nope").status_code == 404
    assert http.get(f"/v1/projects/shop/contexts/{docs.context}").status_code == 404


def test_other_projects_stay_hidden(seeded_live: tuple[Live, Seeded]) -> None:
    live, seeded = seeded_live
    with live.client(live.key("elsewhere", role="read")) as other:
        for path, params in (
            ("/v1/projects/shop/timeline", {"session_id": "s1"}),
            (f"/v1/projects/shop/events/{seeded.events['ask']}/chain", {}),
            ("/v1/projects/shop/graph", {}),
            ("/v1/projects/shop/contexts", {}),
            (f"/v1/projects/shop/contexts/{seeded.contexts[0]}", {}),
        ):
            assert other.get(path, params=params).status_code == 404, path
    with live.client(None) as anonymous:
        assert anonymous.get("/v1/projects/shop/graph").status_code == 401


def test_console_page_needs_no_key_and_ships_its_assets(
    seeded_live: tuple[Live, Seeded],
) -> None:
    live, _ = seeded_live
    with live.client(None) as anonymous:
        root = anonymous.get("/ui")
        assert root.status_code == 307 and root.headers["location"] == "/ui/"
        page = anonymous.get("/ui/")
        assert page.status_code == 200 and "ctxbase console" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        script = anonymous.get("/ui/assets/app.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        assert anonymous.get("/ui/assets/nope.js").status_code == 404
    # every asset is referenced by a relative or same-origin path: nothing from a CDN
    static = Path(__file__).parents[2] / "src/ctxbase/serve/console/static"
    for f in static.rglob("*"):
        if f.suffix in (".html", ".js", ".css"):
            text = f.read_text(encoding="utf-8")
            assert "http://" not in text.replace("http://www.w3.org/2000/svg", ""), f
            assert "https://" not in text, f


def test_server_root_leads_to_the_console_and_other_paths_stay_404(
    seeded_live: tuple[Live, Seeded],
) -> None:
    live, _ = seeded_live
    with live.client(None) as anonymous:
        root = anonymous.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/ui/"
        assert anonymous.get("/", follow_redirects=True).status_code == 200
        for path in ("/nope", "/v1/nope"):
            missing = anonymous.get(path)
            assert missing.status_code == 404, path
            assert missing.json()["error"]["code"] == "not_found", path


def test_package_data_ships_every_console_asset() -> None:
    """An installed wheel has the console: every file under static/ matches a package-data
    pattern of pyproject.toml."""
    import fnmatch
    import tomllib

    root = Path(__file__).parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["ctxbase"]
    package = root / "src/ctxbase"
    assets = [f for f in (package / "serve/console/static").rglob("*") if f.is_file()]
    assert {f.name for f in assets} >= {"index.html", "app.js", "style.css", "graph.js"}
    for f in assets:
        rel = f.relative_to(package).as_posix()
        assert any(fnmatch.fnmatchcase(rel, p) and "/" not in rel[len(p.rstrip("*")) :]
                   for p in patterns), rel  # fmt: skip


def test_ctxbase_serve_prints_the_console_address(tmp_path: Path) -> None:
    """`ctxbase serve --no-auth` as typed: the address it prints opens the console."""
    import re
    import signal
    import subprocess
    import sys

    from ctxbase.serve.server import free_port

    port = free_port()
    command = ["-m", "ctxbase", "--db", str(tmp_path / "ui.db"), "--embedder", "none", "serve"]
    proc = subprocess.Popen(
        [sys.executable, *command, "--no-auth", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said: list[str] = []
        while not said or "console http" not in said[-1]:  # logs first, then the address
            said.append(proc.stderr.readline())
            assert said[-1], said  # the server exited first
        found = re.search(r"console (http://\S+/ui/)", said[-1])
        assert found, said
        console = found.group(1)
        assert console == f"http://127.0.0.1:{port}/ui/"
        page = httpx.get(console, timeout=30)  # printed once it answers: no retry
        assert page.status_code == 200 and "ctxbase console" in page.text
        assert httpx.get(console.replace("/ui/", "/v1/whoami")).json()["role"] == "admin"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_graph_shows_events_only_when_asked(seeded_live: tuple[Live, Seeded]) -> None:
    live, _ = seeded_live
    base = "/v1/projects/mentions"
    with live.client(live.key("mentions", role="write")) as c:
        spec = c.post(f"{base}/entities", json={"type": "document", "name": "spec", "text": "s"})
        code = c.post(f"{base}/entities", json={"type": "code", "name": "q.py", "text": "q"})
        spec_id, code_id = spec.json()["id"], code.json()["id"]
        said = c.post(
            f"{base}/events", json={"type": "user_message", "session_id": "s", "text": "see q.py"}
        ).json()
        for src, rel, dst in ((said["id"], "MENTIONS", code_id), (code_id, "FOLLOWS", spec_id)):
            body = {"from_id": src, "type": rel, "to_id": dst, "source": "test"}
            assert c.post(f"{base}/relations", json=body).status_code == 200
        plain = c.get(f"{base}/graph").json()
        assert {n["kind"] for n in plain["nodes"]} == {"entity"}
        assert [e["type"] for e in plain["edges"]] == ["FOLLOWS"]
        assert "MENTIONS" not in plain["relation_types"]
        wide = c.get(f"{base}/graph", params={"include_events": True}).json()
        events = [n for n in wide["nodes"] if n["kind"] == "event"]
        assert [(n["id"], n["type"]) for n in events] == [(said["id"], "user_message")]
        edges = {(e["from_id"], e["type"], e["to_id"]) for e in wide["edges"]}
        assert {(said["id"], "MENTIONS", code_id), (code_id, "FOLLOWS", spec_id)} <= edges


def test_chain_shows_a_hidden_cause_and_what_lies_beyond(
    seeded_live: tuple[Live, Seeded],
) -> None:
    live, _ = seeded_live
    with live.client(live.key("hid", role="admin")) as c:
        url = "/v1/projects/hid/events"

        def post(kind: str, text: str, parents: list[str]) -> str:
            body = {"type": kind, "session_id": "s", "text": text, "parent_event_ids": parents}
            r = c.post(url, json=body)
            assert r.status_code == 201, r.text
            return str(r.json()["id"])

        ask = post("user_message", "why is checkout slow", [])
        rows = post("tool_result", "zqxsecret rows", [ask])
        fix = post("assistant_message", "add an index", [rows])
        assert c.post("/v1/projects/hid/soft-delete", json={"ids": [rows]}).status_code == 200
        r = c.get(f"{url}/{fix}/chain")
        assert r.status_code == 200, r.text
        got = r.json()
        assert [(n["event"]["id"], n["hops"], n["event"]["marks"]) for n in got["causes"]] == [
            (rows, 1, ["hidden"]),
            (ask, 2, []),
        ]
        assert "zqxsecret" not in r.text
        r = c.get(f"{url}/{ask}/chain")  # downstream: the hidden effect, and the fix beyond it
        assert r.status_code == 200, r.text
        assert [
            (n["event"]["id"], n["hops"], n["event"]["marks"]) for n in r.json()["effects"]
        ] == [
            (rows, 1, ["hidden"]),
            (fix, 2, []),
        ]
        assert "zqxsecret" not in r.text
        hidden = c.get(f"{url}/{rows}/chain")
        assert hidden.status_code == 404 and "restore brings it back" in hidden.text
