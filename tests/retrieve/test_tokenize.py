"""Keyword-index terms: Chinese segmentation, English stemming, identifiers, FTS5 quoting."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbase.cjk_terms import with_characters, with_characters_joined
from ctxbase.retrieve.tokenize import (
    add_words,
    document_terms,
    fts_match_expression,
    index_terms,
    query_terms,
)


def test_chinese_is_segmented_in_search_mode() -> None:
    terms = index_terms("中华人民共和国成立")
    assert "中华人民共和国" in terms
    assert "共和国" in terms
    assert "人民" in terms


def test_mixed_chinese_and_english() -> None:
    # Snowball stems "redis" to "redi"; queries get the same stem, so they still meet.
    assert index_terms("用Redis缓存user表") == ["用", "redi", "缓存", "user", "表"]
    assert query_terms("Redis") == ["redi"]


def test_chinese_particles_and_punctuation_are_dropped() -> None:
    terms = index_terms("你在吗？我的数据库呢，是不是坏了！")
    assert "数据库" in terms
    for dropped in ("在", "吗", "的", "呢", "了", "是", "？", "，", "！"):
        assert dropped not in terms


def test_english_is_lowercased_stemmed_and_stop_words_removed() -> None:
    terms = index_terms("The Users are Caching the queries")
    assert terms == ["user", "cach", "queri"]
    assert index_terms("cache") == index_terms("caching") == ["cach"]


def test_full_width_forms_are_folded() -> None:
    assert index_terms("ＡＢＣ１２３") == index_terms("ABC123") == ["abc123"]
    assert index_terms("端口８０８０") == ["端口", "8080"]


def test_numbers_are_kept() -> None:
    assert index_terms("retry 3 times after 2024") == ["retri", "3", "time", "2024"]
    assert index_terms("pi is 3.14") == ["pi", "3.14", "3", "14"]


@pytest.mark.parametrize(
    ("identifier", "whole", "parts"),
    [
        ("get_user_by_id", "get_user_by_id", ["get", "user", "id"]),
        ("getUserById", "getuserbyid", ["get", "user", "id"]),
        ("HTTPServer", "httpserver", ["http", "server"]),
        ("db.users_table", "db.users_table", ["db", "user", "tabl"]),
        ("base64Encode", "base64encode", ["base64", "encod"]),
    ],
)
def test_identifiers_yield_whole_and_parts(identifier: str, whole: str, parts: list[str]) -> None:
    assert index_terms(identifier) == [whole, *parts]


def test_acronym_plural_is_not_split_as_camel_case() -> None:
    assert index_terms("IDs URLs") == ["id", "url"]


def test_code_line() -> None:
    terms = index_terms("def load_config(path: str) -> Config: return yaml.safe_load(path)")
    for expected in ("load_config", "load", "config", "yaml.safe_load", "safe", "path"):
        assert expected in terms


def test_index_terms_keeps_repeats_and_query_terms_deduplicates() -> None:
    assert index_terms("缓存 缓存 cache caching") == ["缓存", "缓存", "cach", "cach"]
    # then the characters of the Chinese words, once each
    assert query_terms("缓存 缓存 cache caching") == ["缓存", "cach", "缓", "存"]


def test_empty_and_symbol_only_text() -> None:
    assert index_terms("") == []
    assert index_terms("!!! ... 😀 —— 。。") == []
    assert query_terms("   ") == []


def test_fts_match_expression_quotes_and_joins() -> None:
    assert fts_match_expression([]) is None
    assert fts_match_expression(["", "  "]) is None
    assert fts_match_expression(["a", "b"]) == '"a" OR "b"'
    assert fts_match_expression(["a", "b", "a"], mode="and") == '"a" AND "b"'
    assert fts_match_expression(['say "hi"']) == '"say ""hi"""'
    with pytest.raises(ValueError):
        fts_match_expression(["a"], mode="near")  # type: ignore[arg-type]


@pytest.fixture
def fts() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    # Default unicode61 tokenizer, plus '.', '_' and '-' kept inside tokens so identifier
    # terms survive whole; our terms are already split, lowercased and space-joined.
    connection.execute(
        "CREATE VIRTUAL TABLE docs USING fts5("
        "raw, terms, tokenize = \"unicode61 tokenchars '._-'\")"
    )
    yield connection
    connection.close()


def _matches(connection: sqlite3.Connection, column: str, expression: str | None) -> list[int]:
    assert expression is not None
    rows = connection.execute(
        "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rowid",
        (f"{column} : ({expression})",),
    ).fetchall()
    return [row[0] for row in rows]


def test_fts5_finds_chinese_word_through_terms_but_not_raw_text(fts: sqlite3.Connection) -> None:
    documents = ["我们用Redis缓存用户表以加速查询", "订单服务在周五晚上迁移数据库"]
    for document in documents:
        fts.execute(
            "INSERT INTO docs(raw, terms) VALUES (?, ?)",
            (document, " ".join(document_terms(document))),
        )
    query = fts_match_expression(query_terms("缓存"))
    # unicode61 sees "我们用", "redis", "缓存用户表以加速查询": no token equals 缓存.
    assert _matches(fts, "raw", query) == []
    assert _matches(fts, "terms", query) == [1]
    assert _matches(fts, "terms", fts_match_expression(query_terms("数据库迁移"), "and")) == [2]
    assert _matches(fts, "terms", fts_match_expression(query_terms("redis"))) == [1]


def test_fts5_identifier_query_and_hostile_input(fts: sqlite3.Connection) -> None:
    document = "def get_user_by_id(user_id): return db.users.get(user_id)"
    fts.execute(
        "INSERT INTO docs(raw, terms) VALUES (?, ?)", (document, " ".join(index_terms(document)))
    )
    assert _matches(fts, "terms", fts_match_expression(query_terms("get_user_by_id"))) == [1]
    assert _matches(fts, "terms", fts_match_expression(query_terms("user id lookup"))) == [1]
    # FTS5 syntax in the terms is matched literally instead of raising a syntax error.
    hostile = ["NEAR(a b)", "raw:x", '"', "a*", "(", "AND"]
    assert _matches(fts, "terms", fts_match_expression(hostile)) == []


_text = st.text(
    alphabet=st.sampled_from(
        [*"abcXYZ_.-019 \n\t，。！？的了吗缓存数据库中华人民共和国ＡＢ１２\"'*():", "😀"]
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(_text)
def test_terms_are_never_empty_or_spaced_and_always_quotable(text: str) -> None:
    terms = document_terms(text)
    assert all(term and not any(char.isspace() for char in term) for term in terms)
    assert set(query_terms(text)) == set(terms)
    expression = fts_match_expression(terms)
    if expression is not None:
        connection = sqlite3.connect(":memory:")
        connection.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        connection.execute("INSERT INTO t VALUES (?)", (" ".join(terms),))
        # Never a syntax error, and a document always matches its own terms.
        assert (
            connection.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()[
                0
            ]
            == 1
        )
        connection.close()


def test_concurrent_first_use_is_safe() -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(index_terms("中华人民共和国的数据库缓存"))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len({tuple(result) for result in results}) == 1


def test_add_words_makes_a_domain_term_whole() -> None:
    assert "上下文库" not in index_terms("共享的上下文库")
    add_words(["上下文库", "has space", ""])
    terms = index_terms("共享的上下文库")
    assert "上下文库" in terms
    assert "上下文" in terms  # search mode still yields the sub-word


def test_jieba_is_loaded_without_pkg_resources_and_segments_from_its_files() -> None:
    # pkg_resources parses every installed distribution's metadata (~1 s of start-up)
    code = (
        "import sys\n"
        "from ctxbase.retrieve.tokenize import index_terms\n"
        "from ctxbase.anchor.documents import _extractor\n"
        "print(index_terms('中华人民共和国的订单缓存'))\n"
        "print(_extractor().extract_tags('订单查询要走 Redis 缓存，缓存五分钟过期', topK=2))\n"
        "print('pkg_resources' in sys.modules)\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    terms, tags, loaded = done.stdout.splitlines()
    assert "'中华人民共和国'" in terms and "'缓存'" in terms
    assert "缓存" in tags
    assert loaded == "False"


def test_a_long_chinese_run_in_a_query_is_segmented_in_pieces() -> None:
    # jieba's unknown-word pass is quadratic in a run's length: a query's run is read in
    # pieces of 256 characters (documents keep whole runs); shorter runs are whole.
    rng = random.Random(7)
    run = "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(2000))
    pieces = [run[at : at + 256] for at in range(0, len(run), 256)]
    want = list(dict.fromkeys(t for piece in pieces for t in index_terms(piece)))
    assert query_terms(run) == with_characters(want)
    assert query_terms(f"redis {run} cache") == with_characters(["redi", *want, "cach"])
    sentence = "我们用缓存加速查询" * 28  # 252 characters: one piece
    assert query_terms(sentence) == with_characters(list(dict.fromkeys(index_terms(sentence))))
    # the words, then their characters ("用" is a word already)
    assert query_terms(sentence) == ["用", "缓存", "加速", "查询", *"缓存加速查询"]


def test_characters_of_chinese_words_are_terms_too() -> None:
    question, answer = "体检前一天晚上有什么要求？", "前一晚10点以后禁食禁水"
    # jieba cuts the question and the answer differently: they share no word
    assert set(index_terms(question)) & set(index_terms(answer)) == set()
    asked, said = query_terms(question), document_terms(answer)
    # ...but characters: each once, after the words; stop words ("以") left out
    assert {"前", "晚", "一"} <= set(asked) & set(said)
    assert "以" not in said and said.count("晚") == 1
    assert said[: len(index_terms(answer))] == index_terms(answer)


def test_with_characters_is_idempotent_and_leaves_other_scripts_alone() -> None:
    terms = ["缓存", "用", "redis", "cach", "数据库", "数据", "カ"]
    once = with_characters(terms)
    assert once == [*terms, "缓", "存", "数", "据", "库"]  # "用" is a word already
    assert with_characters(once) == once
    assert with_characters(["redis", "cach", "getuser"]) == ["redis", "cach", "getuser"]
    assert with_characters_joined("redis cach") == "redis cach"
    assert with_characters_joined(" ".join(terms)) == " ".join(once)
    assert with_characters_joined("") == ""
