"""Keyword terms carried across Chinese and English (retrieve/term_bridge.py): the dictionary
reading and the term weights as pure functions, the shipped CC-CEDICT copy, the keyword
index's weighted terms, and a search finding a Chinese memory for an English question (every
backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

import gzip
import marshal
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.term_bridge import (
    TermBridge,
    bridged_weights,
    cache_file,
    load_term_bridge,
    parse_cedict,
    read_term_bridge,
)

SAMPLE = "\n".join(
    [
        "# CC-CEDICT sample",
        "駁回 驳回 [bo2 hui2] /to reject/to turn down/to overrule/",
        "申請 申请 [shen1 qing3] /to apply for sth/application (form etc)/",
        "部署 部署 [bu4 shu3] /to dispose/to deploy/",
        "拒 拒 [ju4] /to resist/to repel/to refuse/",  # one character: too vague
        "個 个 [ge4] /variant of 個/CL:個/",
        "私生 私生 [si1 sheng1] /to have a child out of wedlock/",  # describes, not translates
        "上線 上线 [shang4 xian4] /to go online/",
    ]
)


def test_the_dictionary_is_read_both_ways_with_stems() -> None:
    bridge = parse_cedict(SAMPLE)
    # English terms as queries have them: "rejected" and "applications" are stemmed
    assert bridge.counterparts("reject") == ("驳回",)
    assert bridge.counterparts("applic") == ("申请",)
    assert bridge.counterparts("deploy") == ("部署",)
    # a Chinese word's glosses as keyword terms ("to", "sth" and "down" say nothing)
    assert set(bridge.counterparts("驳回")) == {"reject", "turn", "overrul"}
    assert set(bridge.counterparts("申请")) == {"appli", "applic"}  # "(form etc)" is a note
    # single characters, variants, measure words and long glosses are left out
    assert bridge.counterparts("拒") == ()
    assert bridge.counterparts("resist") == ()
    assert bridge.counterparts("wedlock") == ()
    assert bridge.counterparts("个") == ()
    assert bridge.counterparts("nowhere") == ()


def test_only_terms_the_project_lacks_are_carried_to_the_few_counterparts_it_holds() -> None:
    bridge = parse_cedict(SAMPLE)
    held = {"驳回", "申请", "部署", "reject"}

    def known(words: object) -> set[str]:
        return {w for w in words if w in held}  # type: ignore[attr-defined]

    # "applic" is not held: its counterpart joins at the weight; "reject" is held: it meets
    # its memories itself, and its counterpart 驳回 stays out
    weights = bridged_weights(["applic", "reject"], bridge, known, 0.5, cap=8)
    assert weights == {"applic": 1.0, "reject": 1.0, "申请": 0.5}
    assert bridged_weights(["驳回", "reject"], bridge, known, 0.5, cap=8) == {
        "驳回": 1.0,
        "reject": 1.0,
    }
    # a term with more counterparts in the project than the cap carries none
    many = {"申请", "x", "y"}
    assert bridged_weights(["applic"], bridge, lambda w: set(w) & many | {"x", "y"}, 0.5, 2) == {
        "applic": 1.0
    }
    # counterparts the project does not hold are not searched
    assert bridged_weights(["deploy"], bridge, lambda w: set(), 0.5, cap=8) == {"deploy": 1.0}


def test_a_chinese_counterpart_brings_its_words_not_its_characters() -> None:
    bridge = parse_cedict("應用程序 应用程序 [ying4 yong4 cheng2 xu4] /application/\n")
    chinese = lambda words: {w for w in words if not w.isascii()}  # noqa: E731
    weights = bridged_weights(["applic"], bridge, chinese, 0.25, cap=8)
    assert weights["应用程序"] == 0.25
    assert all(len(term) >= 2 for term in weights)
    assert {"应用", "程序"} <= set(weights)


def test_the_shipped_dictionary_bridges_everyday_words() -> None:
    bridge = load_term_bridge()
    assert "驳回" in bridge.counterparts("reject")
    assert "部署" in bridge.counterparts("deploy")
    assert "延迟" in bridge.counterparts("delay")
    assert "reject" in bridge.counterparts("驳回")
    assert load_term_bridge() is bridge  # read once


def test_the_parsed_dictionary_is_cached_and_a_damaged_cache_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    data = gzip.compress(SAMPLE.encode("utf-8"))
    cache = cache_file(data)
    assert cache.parent == tmp_path / "ctxbase" and not cache.exists()
    first = read_term_bridge(data)
    assert first.counterparts("reject") == ("驳回",) and cache.exists()
    assert marshal.loads(cache.read_bytes()) == first.maps()
    # the next read takes the cache, not the text: a cache saying otherwise is believed
    cache.write_bytes(marshal.dumps(TermBridge({"reject": ["否决"]}, {"否决": ["reject"]}).maps()))
    assert read_term_bridge(data).counterparts("reject") == ("否决",)
    # other data has its own cache file
    assert cache_file(gzip.compress(b"# another version\n")) != cache
    # a damaged cache is parsed again and written whole
    cache.write_bytes(cache.read_bytes()[:40])
    assert read_term_bridge(data).counterparts("reject") == ("驳回",)
    assert marshal.loads(cache.read_bytes()) == first.maps()
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # no part left behind


def test_an_unwritable_cache_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    bridge = read_term_bridge(gzip.compress(SAMPLE.encode("utf-8")))
    assert bridge.counterparts("deploy") == ("部署",)


def test_a_weighted_term_counts_that_much_of_its_bm25_weight(cb: ContextBase) -> None:
    for n in range(6):
        cb.record("user_message", session_id="s", text=f"Lunch number {n} was pasta")
    target = cb.record("user_message", session_id="s", text="The deploy finished at noon")
    keywords = cb.searcher.keywords
    [(found, full)] = keywords.search(cb.project, ["deploy"], 10)
    [(again, half)] = keywords.search(cb.project, ["deploy"], 10, weights={"deploy": 0.5})
    assert found == again == target.id
    assert half == pytest.approx(full / 2)


def test_the_index_says_whether_it_holds_other_than_ascii_terms(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s", text="The deploy finished at noon")
    assert not cb.searcher.keywords.holds_non_ascii(cb.project)
    cb.record("user_message", session_id="s", text="部署在中午完成")
    assert cb.searcher.keywords.holds_non_ascii(cb.project)


def test_an_english_question_finds_a_memory_written_in_chinese(cb: ContextBase) -> None:
    target = cb.record("user_message", session_id="s", text="审核结果出来了，我们的申请被驳回了").id
    for text in ("午饭吃了面条", "明天下午三点开会", "The weather in Helsinki is fine today"):
        cb.record("user_message", session_id="s", text=text)
    query = "Why was our application rejected?"
    plain = get_preset("keyword")
    assert target not in [c.item.owner_id for c in cb.search(query, config=plain).results]
    bridged = get_preset("keyword", term_bridge=0.5)
    assert [c.item.owner_id for c in cb.search(query, config=bridged).results][:1] == [target]
    # and the other way: a Chinese question over an English memory ("草稿": draft; the
    # project holds no 草稿 to meet it in Chinese)
    note = cb.record("user_message", session_id="t", text="The reviewers sent the draft back").id
    question = "草稿为什么退回了"
    assert note not in [c.item.owner_id for c in cb.search(question, config=plain).results]
    assert note in [c.item.owner_id for c in cb.search(question, config=bridged).results]
