"""clean_text on extracted Chinese pages, parse_markdown, version detection, key terms."""

from __future__ import annotations

from ctxbase.anchor.documents import clean_text, detect_version, key_terms, parse_markdown

EXTRACTED_PDF = (
    "跨境支付合规指南　２０２４版\n"
    "第一章　总则\n"
    "１．本指南适用于ＡＢＣ公司的跨境支付业务（含退款）。\n"
    "本文件为内部资料，请勿外传。\n"
    "第 1 页 共 3 页\n"
    "\f跨境支付合规指南　２０２４版\n"
    "第二章　限额\n"
    "单笔  限额为５万元，  超过需 申报。\n"
    "本文件为内部资料，请勿外传。\n"
    "- 2 -\n"
    "\f跨境支付合规指南　２０２４版\n"
    "第三章　申报义务\n"
    "申报须在Ｔ＋１日内完成：ｅｍａｉｌ＠ｅｘａｍｐｌｅ．ｃｏｍ\n"
    "本文件为内部资料，请勿外传。\n"
    "Page 3 of 3\n"
)


def test_clean_text_removes_page_furniture_and_normalises_width() -> None:
    cleaned = clean_text(EXTRACTED_PDF)
    assert "跨境支付合规指南" not in cleaned  # a running header on every page
    assert "页" not in cleaned and "Page 3" not in cleaned and "- 2 -" not in cleaned
    assert "内部资料" not in cleaned  # the notice sits at the foot of every page
    assert "\f" not in cleaned and "　" not in cleaned
    assert "1.本指南适用于ABC公司的跨境支付业务（含退款）。" in cleaned  # Chinese （）。 kept
    assert "单笔限额为5万元,超过需申报。" in cleaned or "单笔限额为5万元，超过需申报。" in cleaned
    assert "申报须在T+1日内完成：email@example.com" in cleaned
    assert cleaned.splitlines()[0] == "第一章 总则"


def test_clean_text_keeps_one_copy_of_a_notice_repeated_in_the_body() -> None:
    text = (
        "CONFIDENTIAL - do not distribute\nIntro paragraph.\n\n"
        "Body one.\nCONFIDENTIAL - do not distribute\nBody two.\n"
        "CONFIDENTIAL - do not distribute\nEnd."
    )
    cleaned = clean_text(text)
    assert cleaned.count("CONFIDENTIAL") == 1
    assert "Body two." in cleaned and "End." in cleaned


def test_clean_text_collapses_whitespace_and_blank_lines() -> None:
    assert clean_text("a \t  b\r\n\r\n\r\n\r\nc\u00a0\u00a0d\u200b") == "a b\n\nc d"


MARKDOWN = """---
title: 订单服务设计
version: 1.10
tags: [orders, cache]
---
# 订单服务设计

总体说明，参见 [Redis 规范](docs/redis.md) 与 https://example.com/spec。

## 缓存策略

订单查询接口缓存 5 分钟。

```sql
SELECT * FROM orders WHERE user_id = 1;
```

### 失效

```
def invalidate(key):
    cache.delete(key)
```

## 接口
# not a heading inside text? yes it is a heading
"""


def test_parse_markdown_sections_title_version_code_blocks() -> None:
    result = parse_markdown(MARKDOWN, "docs/orders.md")
    assert not result.fallback and result.parser == "markdown"
    assert result.properties["title"] == "订单服务设计"
    assert result.properties["version"] == "1.10"  # as written, not the float 1.1
    document = result.units[0]
    assert document.kind == "document" and document.name == "订单服务设计"
    assert document.properties["front_matter"]["tags"] == ("orders", "cache")
    sections = result.units_of("section")
    assert [section.properties["heading_path"] for section in sections] == [
        ("订单服务设计",),
        ("订单服务设计", "缓存策略"),
        ("订单服务设计", "缓存策略", "失效"),
        ("订单服务设计", "接口"),
        ("not a heading inside text? yes it is a heading",),
    ]
    cache = sections[1]
    assert cache.qualname == "订单服务设计 > 缓存策略"
    assert (cache.start_line, cache.end_line) == (10, 17)
    assert cache.text.startswith("## 缓存策略") and "SELECT * FROM orders" in cache.text
    blocks = result.units_of("code_block")
    assert [(block.language, block.parent) for block in blocks] == [
        ("sql", "订单服务设计 > 缓存策略"),
        ("python", "订单服务设计 > 缓存策略 > 失效"),
    ]
    assert blocks[1].properties["tagged"] is False
    assert blocks[0].text == "SELECT * FROM orders WHERE user_id = 1;"
    cites = [(ref.from_qualname, ref.target) for ref in result.references_of("cites")]
    assert cites == [
        ("订单服务设计", "docs/redis.md"),
        ("订单服务设计", "https://example.com/spec"),
    ]


def test_headings_inside_code_blocks_are_not_sections() -> None:
    text = "# Real\n\n```bash\n# a shell comment\necho hi\n```\n"
    result = parse_markdown(text)
    assert [unit.name for unit in result.units_of("section")] == ["Real"]


def test_preamble_setext_and_duplicate_headings() -> None:
    text = "Intro text before any heading.\n\nGuide\n=====\n\n## Steps\n\n## Steps\n"
    result = parse_markdown(text)
    sections = result.units_of("section")
    assert [section.qualname for section in sections] == [
        "(preamble)",
        "Guide",
        "Guide > Steps",
        "Guide > Steps (2)",
    ]
    assert result.properties["title"] == "Guide"


def test_version_patterns() -> None:
    assert detect_version("Redis 规范 V3.2", "") == "3.2"
    assert detect_version("接口文档 版本 1.2", "") == "1.2"
    assert detect_version("API guide", "# API guide\n\nVersion: 2.0.1\n") == "2.0.1"
    assert detect_version("Python tips", "We use Python v3.11 here.") is None
    assert detect_version("Guide V2", "") == "2"
    assert detect_version("订单文档 版本2", "") == "2"
    for title in ("Python 3", "Step 2", "Setup IPv6"):
        assert detect_version(title, "") is None, title


def test_key_terms_chinese() -> None:
    text = (
        "跨境支付合规指南规定了跨境支付的限额和申报义务。跨境支付的单笔限额为五万元，"
        "超过限额需要在规定时间内完成申报。申报义务由支付机构承担，支付机构应保存申报记录。"
    )
    terms = key_terms(text, k=5)
    assert len(terms) == 5
    assert "跨境" in terms or "跨境支付" in terms
    assert "申报" in terms and "限额" in terms
    assert all(len(term) >= 2 for term in terms)


def test_key_terms_english_skips_stop_words_and_finds_phrases() -> None:
    text = (
        "The context base anchors documents, code and SQL. Retrieval combines keyword search, "
        "vector search and graph traversal. The context base assembles token budgets per "
        "agent role, and graph traversal follows REFERENCES edges."
    )
    terms = key_terms(text, k=6)
    assert "context base" in terms and "graph traversal" in terms
    assert "REFERENCES" in terms
    assert not {"the", "and", "per"} & {term.lower() for term in terms}
    assert key_terms("", k=3) == [] and key_terms("text", k=0) == []
