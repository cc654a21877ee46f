"""The web console in a real headless browser (Debian's chromium driven by Playwright) over
a real server on a seeded project: each page is opened, what it shows is checked, and a
screenshot is saved under the test's tmp_path."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_seed import Docs, Seeded, seed_big_session, seed_docs_project, seed_project
from live_server import Live, start

from ctxbase.serve.server import BackgroundServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.path.exists("/usr/bin/chromium"):
    CHROMIUM = "/usr/bin/chromium"
if CHROMIUM is None:
    pytest.skip(
        "the console's browser tests need Debian's chromium (apt-get install chromium); "
        ".ci/run installs it",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BIG = 10_000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Seeded]]:
    tmp = tmp_path_factory.mktemp("console")
    seeded = seed_project(str(tmp / "serve.db"), "shop")
    seed_big_session(str(tmp / "serve.db"), "big", "long", BIG)
    yield tmp, seeded


@pytest.fixture(scope="module")
def docs(world: tuple[Path, Seeded]) -> Docs:
    return seed_docs_project(str(world[0] / "serve.db"), "docs")


@pytest.fixture(scope="module")
def server(world: tuple[Path, Seeded], docs: Docs) -> Iterator[BackgroundServer]:
    """`ctxbase serve --no-auth` on the seeded database."""
    srv = start(world[0], no_auth=True)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser, server: BackgroundServer) -> Iterator[Page]:
    """A fresh tab; it must raise no script error and ask nothing of another origin."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on(
        "request",
        lambda r: None if r.url.startswith((server.url, "data:")) else foreign.append(r.url),
    )
    try:
        yield tab
    finally:
        context.close()
    assert errors == []
    assert foreign == []


def ui(server: BackgroundServer, fragment: str = "") -> str:
    return f"{server.url}/ui/{fragment}"


def shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000


def test_projects_and_sessions(page: Page, server: BackgroundServer, tmp_path: Path) -> None:
    page.goto(ui(server))
    cards = page.locator("#projects .project-card")
    expect(cards).to_have_count(3)
    expect(cards).to_have_text(["big", "docs", "shop"])
    expect(page.locator("#who")).to_have_text("no auth (local)")
    expect(page.locator("#login")).to_be_hidden()
    shot(page, tmp_path, "projects")
    cards.filter(has_text="shop").click()
    row = page.locator("#sessions .session-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("s1")
    expect(row).to_contain_text("订单缓存上线")
    shot(page, tmp_path, "sessions")
    row.click()
    expect(page.locator("#timeline .event-row")).to_have_count(6)


def test_session_timeline(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    page.goto(ui(server, "#/p/shop/s/s1"))
    rows = page.locator("#timeline .event-row")
    expect(rows).to_have_count(6)
    expect(rows.nth(0)).to_contain_text("alice")
    expect(rows.nth(0)).to_contain_text("user_message")
    expect(rows.nth(2)).to_contain_text("run_sql(SELECT * FROM orders")
    expect(page.locator("#filter-agent input")).to_have_count(4)  # alice, coder, planner, tester
    expect(page.locator("#lanes circle")).to_have_count(6)
    # a type is a badge, an agent coloured text: two palettes that share no colour, so
    # alice and tool_result are never both blue
    expect(page.locator("#timeline .event-row .badge.etype")).to_have_count(6)
    expect(page.locator("#timeline .event-row .agent")).to_have_count(6)
    expect(rows.nth(0).locator(".etype")).to_have_text("user_message")
    colours = page.evaluate(
        """() => ({
          agents: [...document.querySelectorAll('#timeline .agent, #filter-agent .agent')]
            .map((e) => getComputedStyle(e).color),
          types: [...document.querySelectorAll('#timeline .etype, #filter-type .etype')]
            .map((e) => getComputedStyle(e).color),
          dots: [...document.querySelectorAll('#lanes circle')].map((e) => e.getAttribute('fill')),
        })"""
    )
    assert len(set(colours["agents"])) == 4 and len(set(colours["types"])) >= 3
    assert not set(colours["agents"]) & set(colours["types"])
    assert len(set(colours["dots"])) >= 3  # the lane dots keep the type colours
    expect(page.locator("#page-status")).to_contain_text("6 shown of 6")
    expect(page.locator("#page-next")).to_be_disabled()
    shot(page, tmp_path, "timeline")
    page.locator("#filter-agent input[value=coder]").check()
    expect(rows).to_have_count(3)
    expect(page.locator("#page-status")).to_contain_text("filtered; 6 in the session")
    for i in range(3):
        expect(rows.nth(i)).to_contain_text("coder")
    rows.nth(1).click()  # the tool result
    expect(page.locator("#event-detail")).to_contain_text(world[1].events["rows"])


def test_causal_chain(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    ev = world[1].events
    page.goto(ui(server, f"#/p/shop/e/{ev['rows']}"))
    expect(page.locator("#event-detail")).to_contain_text("20 rows in 840 ms")
    causes = page.locator("#causes .chain-row")
    expect(causes).to_have_count(3)
    expect(causes.nth(0)).to_contain_text("tool_invocation")
    expect(causes.nth(2)).to_contain_text("alice")
    expect(page.locator("#effects .chain-row")).to_have_count(2)
    # as on the timeline: a type is a badge, an agent coloured text, palettes apart
    colours = page.evaluate(
        """() => ({
          agents: [...document.querySelectorAll('.chain-row .agent, #event-detail .agent')]
            .map((e) => getComputedStyle(e).color),
          types: [...document.querySelectorAll('.chain-row .etype, #event-detail .etype')]
            .map((e) => getComputedStyle(e).color),
          boxes: [...document.querySelectorAll('#chain-graph .node > rect:nth-of-type(3)')]
            .map((e) => e.getAttribute('fill')),
        })"""
    )
    assert len(colours["agents"]) == 6 and len(colours["types"]) == 6
    assert len(set(colours["agents"])) >= 3 and len(set(colours["types"])) >= 3
    assert not set(colours["agents"]) & set(colours["types"])
    # the boxes keep the type colours, as the timeline's dots do
    boxes = {"rgb({}, {}, {})".format(*bytes.fromhex(c[1:])) for c in colours["boxes"]}
    assert len(colours["boxes"]) == 6 and boxes <= set(colours["types"])
    graph = page.locator("#chain-graph")
    expect(graph.locator(".node")).to_have_count(6)
    # ask->plan, plan->sql, sql->rows, rows->test, test->fix, plan->fix
    expect(graph.locator(".edge")).to_have_count(6)
    expect(graph.locator(".node.focus")).to_have_attribute("data-node", ev["rows"])
    # causes are drawn above the event, effects below
    y: dict[str, float] = {}
    for name in ("ask", "rows", "fix"):
        box = graph.locator(f'.node[data-node="{ev[name]}"]').bounding_box()
        assert box is not None
        y[name] = box["y"]
    assert y["ask"] < y["rows"] < y["fix"]
    shot(page, tmp_path, "chain")
    graph.locator(f'.node[data-node="{ev["plan"]}"]').click()
    expect(page.locator("#event-detail")).to_contain_text(ev["plan"])
    expect(page.locator("#causes .chain-row")).to_have_count(1)
    expect(page.locator("#effects .chain-row")).to_have_count(4)


def test_entity_graph(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    ent = world[1].entities
    page.goto(ui(server, "#/p/shop/graph"))
    graph = page.locator("#entity-graph")
    expect(graph.locator(".node")).to_have_count(4)
    expect(graph.locator(".edge")).to_have_count(4)
    expect(graph.locator(f'.node[data-node="{ent["code"]}"]')).to_have_attribute(
        "data-type", "code"
    )
    expect(graph).to_contain_text("FOLLOWS 0.90")
    relations = page.locator("#relations .relation-row")
    expect(relations).to_have_count(4)
    follows = relations.filter(has_text="FOLLOWS")
    expect(follows).to_contain_text("orders.query_orders")
    expect(follows).to_contain_text("Redis cache spec")
    expect(follows).to_contain_text("0.90")
    expect(follows).to_contain_text("reviewer")
    shot(page, tmp_path, "graph")
    graph.locator('.edge-g[data-type="VALIDATES"]').click()
    panel = page.locator("#edge-detail")
    expect(panel).to_contain_text("tester")
    expect(panel).to_contain_text("0.80")
    # filter by entity type: code and document only
    page.locator("#filter-entity-type input[value=code]").check()
    expect(graph.locator(".node")).to_have_count(1)
    page.locator("#filter-entity-type input[value=document]").check()
    expect(page.locator("#entity-graph .node")).to_have_count(2)
    expect(page.locator("#entity-graph .edge")).to_have_count(1)
    expect(page.locator("#relations .relation-row")).to_have_text(
        [
            "orders.query_ordersFOLLOWSRedis cache spec0.90reviewer",
        ]
    )
    # a node's neighbourhood
    page.locator(f'#entity-graph .node[data-node="{ent["spec"]}"]').click()
    page.locator("#focus-link").click()
    expect(page.locator("#view h1")).to_contain_text("Neighbourhood of Redis cache spec")
    expect(page.locator("#entity-graph .node")).to_have_count(4)
    shot(page, tmp_path, "graph-focus")


def test_assembly_trace(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    wide = world[1].contexts[0]
    page.goto(ui(server, "#/p/shop/s/s1"))
    page.locator("#session-contexts").click()  # the contexts assembled in this session
    expect(page.locator("#view h1")).to_have_text("Assembled contexts of s1")
    rows = page.locator("#contexts .context-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("tester")
    expect(rows.nth(1)).to_contain_text("coder")
    rows.nth(1).get_by_role("link").click()
    expect(page.locator("#view h1")).to_have_text(f"Context {wide}")
    expect(page.locator("#policy")).to_contain_text("coder")
    expect(page.locator("#reasons li").first).to_contain_text("policy 'coder'")
    bar = page.locator("#token-bar rect")
    assert bar.count() >= 3
    # the policy's system prompt with the note that quoted data is data: 62 tokens
    expect(page.locator('.layer-tokens[data-layer="system"]')).to_contain_text("system: 62")
    candidates = page.locator("#candidates .candidate-row")
    assert candidates.count() >= 3
    expect(candidates.filter(has_text="code_orders")).to_contain_text("kept · memory")
    expect(page.locator("#candidates .badge.keyword").first).to_be_visible()
    expect(page.locator("#trace-relations")).to_contain_text("FOLLOWS")
    considered = page.locator("#considered .considered-row")
    assert considered.count() >= 3  # every search hit, with its scores
    expect(considered.filter(has_text="doc_redis_spec").locator(".badge.vector")).to_have_count(1)
    shot(page, tmp_path, "trace")
    candidates.filter(has_text="code_orders").get_by_role("link").click()
    expect(page.locator("#view h1")).to_have_text("Neighbourhood of orders.query_orders")
    # the tester's narrow budget and fixed top_k leave items out: the trace lists them
    page.goto(ui(server, f"#/p/shop/c/{world[1].contexts[1]}"))
    expect(page.locator("#dropped .drop-row").first).to_be_visible()


def test_context_diff(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    wide, narrow = world[1].contexts
    page.goto(ui(server, "#/p/shop/contexts"))
    expect(page.locator("#compare")).to_be_disabled()
    page.locator(f'#contexts input[name=a][value="{wide}"]').check()
    page.locator(f'#contexts input[name=b][value="{narrow}"]').check()
    page.locator("#compare").click()
    expect(page.locator("#view h1")).to_have_text("Context diff")
    summary = page.locator("#diff-summary")
    expect(summary).to_contain_text("policy: coder → tester")
    expect(summary).to_contain_text("+multi_agent_consensus")
    system = page.locator('#token-diff .token-row[data-layer="system"]').locator("td")
    expect(system.nth(1)).to_have_text("62")
    expect(system.nth(2)).to_have_text("62")  # whole at any budget
    # the tester's budget is narrower: its history is cut (memory holds no history turn)
    history = page.locator('#token-diff .token-row[data-layer="history"]').locator("td")
    before, after = int(history.nth(1).inner_text()), int(history.nth(2).inner_text())
    assert after < before
    expect(history.nth(3)).to_have_text(str(after - before))
    expect(page.locator("#score-changes")).to_contain_text("doc_redis_spec")
    expect(page.locator("#prompt-diff .del").first).to_be_visible()
    shot(page, tmp_path, "diff")


def test_search_shows_where_hits_came_from(
    page: Page, server: BackgroundServer, tmp_path: Path
) -> None:
    page.goto(ui(server, "#/p/shop/search"))
    page.locator("#search-input").fill("Redis cache spec")
    page.locator("#search-form button").click()
    hits = page.locator("#search-results .search-hit")
    expect(hits.first).to_be_visible()
    assert hits.count() >= 3
    expect(page.locator("#search-status")).to_contain_text("hits")
    spec = hits.filter(has=page.locator('a:text-is("doc_redis_spec")'))
    expect(spec.locator(".badge.keyword")).to_have_count(1)
    expect(spec.locator(".badge.vector")).to_have_count(1)
    expect(page.locator("#search-results .badge.graph").first).to_be_visible()
    # as on the timeline: a hit's type is a badge, its agent coloured text, palettes apart
    expect(hits.first.locator(".badge.etype")).to_have_count(1)
    colours = page.evaluate(
        """() => ({
          agents: [...document.querySelectorAll('#search-results .agent')]
            .map((e) => getComputedStyle(e).color),
          types: [...document.querySelectorAll('#search-results .etype')]
            .map((e) => getComputedStyle(e).color),
        })"""
    )
    assert colours["agents"] and len(colours["types"]) == hits.count()
    assert not set(colours["agents"]) & set(colours["types"])
    shot(page, tmp_path, "search")


def test_search_names_the_copies_folded_into_a_hit(
    page: Page, server: BackgroundServer, tmp_path: Path
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        ids = [
            c.post(
                "/v1/projects/dups/events",
                json={"type": "user_message", "session_id": s, "text": "my card PIN is 4321"},
            ).json()["id"]
            for s in ("s1", "s2")
        ]
        c.post("/v1/projects/dups/flush")
    page.goto(ui(server, "#/p/dups/search"))
    page.locator("#search-input").fill("card PIN")
    page.locator("#search-form button").click()
    hits = page.locator("#search-results .search-hit")
    expect(hits).to_have_count(1)  # the copy is folded into the hit
    shown = hits.first.get_attribute("data-owner")
    (copy,) = [i for i in ids if i != shown]
    expect(hits.first.locator(".duplicates")).to_have_text(f"same text also in: {copy}")
    shot(page, tmp_path, "search-duplicates")


def test_ten_thousand_events_page_quickly(
    page: Page, server: BackgroundServer, tmp_path: Path
) -> None:
    # measured on a settled server: the seeded events' vectors are computed first
    httpx.post(f"{server.url}/v1/embeddings/wait", params={"timeout": 60}, timeout=90)
    page.goto(ui(server, "#/p/shop"))
    expect(page.locator("#sessions .session-row")).to_have_count(1)
    started = time.perf_counter()
    page.goto(ui(server, "#/p/big/s/long"))
    rows = page.locator("#timeline .event-row")
    expect(rows).to_have_count(100)
    elapsed = time.perf_counter() - started
    render_ms = page.locator("#view").get_attribute("data-render-ms")
    print(
        f"\n10k-event session: first page shown {elapsed * 1000:.0f} ms after navigation "
        f"(its API call and render: {render_ms} ms)"
    )
    expect(page.locator("#page-status")).to_contain_text(f"100 shown of {BIG}")
    expect(page.locator("#page-prev")).to_be_disabled()
    expect(page.locator("#page-next")).to_be_enabled()
    expect(rows.first).to_have_attribute("data-seq", "1")
    shot(page, tmp_path, "big-first")
    page.locator("#page-next").click()
    expect(rows.first).to_have_attribute("data-seq", "101")
    expect(rows).to_have_count(100)
    page.locator("#page-last").click()
    expect(rows.last).to_have_attribute("data-seq", str(BIG))
    expect(page.locator("#page-next")).to_be_disabled()
    page.locator("#page-prev").click()
    expect(rows.last).to_have_attribute("data-seq", str(BIG - 100))


def test_key_entry_when_the_server_wants_keys(
    browser: Browser, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    srv = start(world[0])  # API keys on, the same database
    try:
        key = Live(srv.url, srv.settings.db, srv).key("shop", role="read")
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        tab = context.new_page()
        tab.goto(f"{srv.url}/ui/#/p/shop")
        expect(tab.locator("#login")).to_be_visible()
        expect(tab.locator("#view")).to_be_hidden()
        shot(tab, tmp_path, "login")
        tab.locator("#api-key").fill("cb_wrong_key")
        tab.locator("#login-form button").click()
        expect(tab.locator("#login-error")).to_contain_text("API key")
        tab.locator("#api-key").fill(key)
        tab.locator("#login-form button").click()
        expect(tab.locator("#sessions .session-row")).to_have_count(1)
        expect(tab.locator("#who")).to_contain_text("(read)")
        stored = tab.evaluate("sessionStorage.getItem('ctxbase.apiKey')")
        assert stored == key
        tab.goto(f"{srv.url}/ui/#/")  # the key scoped to shop sees only shop
        expect(tab.locator("#projects .project-card")).to_have_text(["shop"])
        tab.reload()
        expect(tab.locator("#projects .project-card")).to_have_text(["shop"])
        tab.locator("#sign-out").click()
        expect(tab.locator("#login")).to_be_visible()
        assert tab.evaluate("sessionStorage.getItem('ctxbase.apiKey')") is None
        context.close()
    finally:
        srv.stop()


def test_an_unknown_item_is_named_not_a_blank_page(
    browser: Browser, server: BackgroundServer
) -> None:
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(ui(server, "#/p/shop/e/ev_missing"))
        expect(tab.locator("#page-error")).to_have_text("404: event 'ev_missing' not found")
        tab.goto(ui(server, "#/p/shop/c/ctx_missing"))
        expect(tab.locator("#page-error")).to_contain_text("ctx_missing")
        tab.goto(ui(server, "#/p/shop/s/nope"))
        expect(tab.locator("#page-error")).to_contain_text("session 'nope' not found")
        tab.goto(ui(server, "#/p/nope"))  # the API's advice (new_project) is not the console's
        expect(tab.locator("#page-error")).to_contain_text("pick one from the Projects page")
    finally:
        context.close()


def test_layer_table_adds_up(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    for cid in world[1].contexts:
        page.goto(ui(server, f"#/p/shop/c/{cid}"))
        rows = page.locator("#layers .layer-row")
        expect(rows.first).to_be_visible()
        pooled = 0
        for i in range(rows.count()):
            row = rows.nth(i)
            used_here = int(row.locator("td.used").inner_text())
            if row.get_attribute("data-layer") == "input":  # the input has no quota
                expect(row.locator("td.quota")).to_have_text("-")
                continue
            quota = int(row.locator("td.quota").inner_text())
            own = int(row.locator("td.own").inner_text())
            extra = int(row.locator("td.extra").inner_text().lstrip("+"))
            assert own + extra == used_here and 0 <= own <= quota, (cid, i)
            pooled += extra
        # the memory layer has no quota of its own here: all it holds came from the pool
        memory = page.locator('#layers .layer-row[data-layer="memory"]')
        expect(memory.locator("td.quota")).to_have_text("0")
        expect(memory.locator("td.own")).to_have_text("0")
        used = memory.locator("td.used").inner_text()
        assert memory.locator("td.extra").inner_text() == f"+{used}" != "+0"
        assert pooled > 0
    expect(page.locator("#layers-note")).to_contain_text("from pool")
    shot(page, tmp_path, "trace-layers")


def test_dropped_items_show_their_text(
    page: Page, server: BackgroundServer, docs: Docs, world: tuple[Path, Seeded], tmp_path: Path
) -> None:
    page.goto(ui(server, f"#/p/docs/c/{docs.context}"))
    drops = page.locator("#dropped .drop-row")
    expect(drops).to_have_count(5)
    off = page.locator('#dropped .drop-row[data-reason="off topic"]')
    expect(off).to_have_count(5)
    query = page.locator(f'#dropped .drop-row[data-id="{docs.entities["query"]}"]')
    expect(query.locator(".drop-text")).to_have_text(
        "shop.orders.query_orders: def query_orders(user_id): ..."
    )
    expect(query.locator(".detail")).to_contain_text("no hit shares a keyword")
    for i in range(5):
        assert drops.nth(i).locator(".drop-text").inner_text().strip() != ""
    # hidden since the assembly: its id, detail and text stay masked
    hidden = page.locator('#dropped .drop-row[data-id="[hidden]"]')
    expect(hidden).to_have_count(1)
    expect(hidden.locator(".drop-text")).to_have_text("[hidden]")
    expect(page.locator("#notes")).to_contain_text("nothing about the intent")
    expect(page.locator("#dropped")).not_to_contain_text(docs.hidden_event)
    for text in ("zebras", "migrating", "weather"):  # the events of session d2
        expect(page.locator("#dropped")).not_to_contain_text(text)
    shot(page, tmp_path, "trace-drops")
    # events dropped below top_k (the tester's context) show their text too
    page.goto(ui(server, f"#/p/shop/c/{world[1].contexts[1]}"))
    expect(page.locator("#dropped .drop-row .drop-text").first).not_to_be_empty()


def test_timeline_rows_are_links(
    page: Page, server: BackgroundServer, world: tuple[Path, Seeded]
) -> None:
    ev = world[1].events
    page.goto(ui(server, "#/p/shop/s/s1"))
    rows = page.locator("#timeline .event-row")
    expect(rows).to_have_count(6)
    for i, name in enumerate(["ask", "plan", "sql", "rows", "test", "fix"]):
        href = f"#/p/shop/e/{ev[name]}"
        expect(rows.nth(i).locator("a.event-link")).to_have_attribute("href", href)
        expect(rows.nth(i).locator("a.row-link")).to_have_attribute("href", href)
    expect(page.locator("#lanes a circle")).to_have_count(6)
    # ctrl-click on the link, and on a cell of the row, open the event in a new tab
    with page.context.expect_page() as opened:
        rows.nth(3).locator("a.event-link").click(modifiers=["Control"])
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url.endswith(f"#/p/shop/e/{ev['rows']}")
    expect(tab.locator("#event-detail")).to_contain_text("20 rows in 840 ms")
    tab.close()
    with page.context.expect_page() as opened:
        rows.nth(1).locator("td").nth(2).click(modifiers=["Control"])
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url.endswith(f"#/p/shop/e/{ev['plan']}")
    tab.close()
    assert page.url.endswith("#/p/shop/s/s1")  # this tab stayed
    # the keyboard: tab to a row's link, Enter opens it
    rows.nth(2).locator("a.event-link").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#event-detail")).to_contain_text("run_sql(SELECT")
    assert page.url.endswith(f"#/p/shop/e/{ev['sql']}")


def test_a_session_names_its_hidden_events(page: Page, server: BackgroundServer) -> None:
    page.goto(ui(server, "#/p/docs/s/d1"))
    summary = page.locator("#session-summary")
    expect(summary).to_contain_text("1 event (1 hidden) · 1 agent")
    expect(page.locator("#timeline .event-row")).to_have_count(1)
    page.goto(ui(server, "#/p/shop/s/s1"))
    expect(summary).to_contain_text("6 events · 4 agents")
    expect(summary).not_to_contain_text("hidden")


# Every node's box and label, in the svg's own units and on screen.
_GRAPH_BOXES = """svg => {
  const vb = svg.viewBox.baseVal, screen = svg.getBoundingClientRect();
  const nodes = [...svg.querySelectorAll('.node')].map((g) => {
    const rect = g.querySelector('rect'), m = g.transform.baseVal.consolidate().matrix;
    const r = rect.getBBox(), s = rect.getBoundingClientRect();
    return {
      id: g.dataset.node,
      box: [m.e + r.x, m.f + r.y, m.e + r.x + r.width, m.f + r.y + r.height],
      screen: [s.left, s.top, s.right, s.bottom],
      texts: [...g.querySelectorAll('text')].map((t) => {
        const b = t.getBBox();
        return [m.e + b.x, m.e + b.x + b.width];
      }),
    };
  });
  return { viewBox: [vb.x, vb.y, vb.width, vb.height],
    screen: [screen.left, screen.top, screen.right, screen.bottom], nodes };
}"""


def test_graph_keeps_nodes_inside_and_apart(
    page: Page, server: BackgroundServer, tmp_path: Path
) -> None:
    page.goto(ui(server, "#/p/docs/graph"))
    graph = page.locator("#entity-graph")
    expect(graph.locator(".node")).to_have_count(14)
    expect(graph.locator(".edge")).to_have_count(12)
    got = graph.evaluate(_GRAPH_BOXES)
    x0, y0, w, h = got["viewBox"]
    sl, st, sr, sb = got["screen"]
    boxes = got["nodes"]
    for n in boxes:
        left, top, right, bottom = n["box"]
        assert x0 <= left and right <= x0 + w and y0 <= top and bottom <= y0 + h, n
        a, b, c, d = n["screen"]
        assert sl <= a and c <= sr and st <= b and d <= sb, n
        for text_left, text_right in n["texts"]:  # labels are cut to their box
            assert left <= text_left and text_right <= right, n
    for i, p in enumerate(boxes):
        for q in boxes[i + 1 :]:
            pl, pt, pr, pb = p["box"]
            ql, qt, qr, qb = q["box"]
            assert pr <= ql or qr <= pl or pb <= qt or qb <= pt, (p["id"], q["id"])
    shot(page, tmp_path, "graph-14")


def test_the_timeline_marks_retracted_and_wrong_rated_messages(
    browser: Browser, tmp_path: Path
) -> None:
    import ctxbase

    with ctxbase.open(str(tmp_path / "serve.db"), project="marks", embedder="hash") as cb:
        said = cb.record("assistant_message", session_id="m1", text="we will use MongoDB")
        rated = cb.record("assistant_message", session_id="m1", text="billing runs hourly")
        cb.record("user_message", session_id="m1", text="thanks")
        cb.expire_message("m1", said.id)
        cb.feedback(rated.id, "wrong", note="billing runs daily")
    srv = start(tmp_path, no_auth=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(ui(srv, "#/p/marks/s/m1"))
        rows = tab.locator("#timeline .event-row")
        expect(rows).to_have_count(3)
        expect(rows.nth(0).locator(".badge.mark")).to_have_text("retracted")
        expect(rows.nth(1).locator(".badge.mark")).to_have_text("wrong")
        expect(rows.nth(2).locator(".badge.mark")).to_have_count(0)
        expect(rows.nth(0)).to_contain_text("we will use MongoDB")  # the text is still shown
        # a search whose ranks skip them says what was left out and why, with the correction
        tab.goto(ui(srv, "#/p/marks/search?q=billing%20hourly%20MongoDB&preset=keyword"))
        out = tab.locator("#search-left-out li")
        expect(out).to_have_count(2)
        expect(tab.locator("#search-left-out")).to_contain_text("left out: retracted")
        expect(tab.locator("#search-left-out")).to_contain_text("left out: rated wrong")
        expect(tab.locator("#search-left-out")).to_contain_text("correction: billing runs daily")
        assert errors == []
    finally:
        context.close()
        srv.stop()


def test_causal_chain_shows_a_hidden_cause_by_id(page: Page, server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
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
    page.goto(ui(server, f"#/p/hid/e/{fix}"))
    causes = page.locator("#causes .chain-row")
    expect(causes).to_have_count(2)
    expect(causes.nth(0)).to_contain_text("[hidden] (restore brings it back)")
    expect(causes.nth(1)).to_contain_text("why is checkout slow")
    expect(page.locator("#chain-graph")).to_contain_text("[hidden]")
    assert "zqxsecret" not in page.content()


def test_a_revoked_key_a_stopped_server_and_a_wrong_link_are_said_plainly(
    browser: Browser, world: tuple[Path, Seeded]
) -> None:
    from ctxbase.serve.keys import parse_key, revoke_key
    from ctxbase.store import open_store

    srv = start(world[0])  # API keys on, the same database
    stopped = False
    try:
        live = Live(srv.url, srv.settings.db, srv)
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        tab = context.new_page()
        # a key of a project with no data sees no project: it says whose projects it read
        empty = live.key("other", role="read")
        tab.goto(f"{srv.url}/ui/#/")
        tab.locator("#api-key").fill(empty)
        tab.locator("#login-form button").click()
        expect(tab.locator("#view")).to_contain_text("its projects: other")
        tab.locator("#sign-out").click()
        key = live.key("shop", role="read")
        tab.locator("#api-key").fill(key)
        tab.locator("#login-form button").click()
        expect(tab.locator("#projects .project-card")).to_have_text(["shop"])
        # a page that does not exist says so, not the projects list
        tab.goto(f"{srv.url}/ui/#/p/shop/zzz")
        expect(tab.locator("#page-error")).to_have_text("No such page: #/p/shop/zzz")
        # an unknown project: the API's advice to pass new_project is not for the console
        tab.goto(f"{srv.url}/ui/#/p/nope")
        expect(tab.locator("#page-error")).to_contain_text("the Projects page lists")
        expect(tab.locator("#page-error")).not_to_contain_text("whoami")
        # revoked meanwhile: the next page asks for a key and the header names none
        parsed = parse_key(key)
        assert parsed is not None
        store = open_store(srv.settings.db)
        try:
            revoke_key(store, parsed[0])
        finally:
            store.close()
        tab.goto(f"{srv.url}/ui/#/p/shop/graph")
        expect(tab.locator("#login")).to_be_visible()
        expect(tab.locator("#who")).to_have_text("")
        expect(tab.locator("#tabs")).to_have_text("")
        # signed in again, then the server stops: the next page says it did not answer
        tab.locator("#api-key").fill(live.key("shop", role="read"))
        tab.locator("#login-form button").click()
        expect(tab.locator("#who")).to_contain_text("(read)")
        srv.stop()
        stopped = True
        tab.goto(f"{srv.url}/ui/#/p/shop/contexts")
        expect(tab.locator("#page-error")).to_contain_text("the server did not answer")
        expect(tab.locator("#page-error")).not_to_contain_text("Failed to fetch")
        context.close()
    finally:
        if not stopped:
            srv.stop()
