"""detect_file: binary, too large, undecodable, GB18030 and UTF-8 files, and languages."""

from __future__ import annotations

import struct
import zlib

from ctxbase.anchor.files import detect_file, language_for_path


def _png() -> bytes:
    header = b"\x89PNG\r\n\x1a\n"
    body = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + body
    return header + struct.pack(">I", len(body)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def test_utf8_python_file() -> None:
    verdict = detect_file("src/app/main.py", "print('你好')\n".encode())
    assert verdict.ok and verdict.status == "text"
    assert (verdict.language, verdict.encoding) == ("python", "utf-8")
    assert verdict.text == "print('你好')\n"


def test_gb18030_chinese_document() -> None:
    text = "订单系统需求说明书\n第一章 总则：本系统用于处理跨境支付订单。\n"
    verdict = detect_file("docs/需求.txt", text.encode("gb18030"))
    assert verdict.ok and verdict.encoding == "gb18030"
    assert verdict.text == text and verdict.language == "text"


def test_utf8_bom_and_utf16() -> None:
    bom = detect_file("q.sql", b"\xef\xbb\xbfSELECT 1;")
    assert bom.encoding == "utf-8-sig" and bom.text == "SELECT 1;" and bom.language == "sql"
    utf16 = detect_file("notes.md", "# 标题\n".encode("utf-16"))
    assert utf16.ok and utf16.text == "# 标题\n"


def test_binary_files_are_skipped_with_a_reason() -> None:
    png = detect_file("logo.png", _png())
    assert png.skipped and png.status == "binary" and "PNG" in (png.reason or "")
    blob = detect_file("data.bin", bytes(range(256)) * 4)
    assert blob.status == "binary" and png.text is None
    pdf = detect_file("spec.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj")
    assert pdf.status == "binary" and "PDF" in (pdf.reason or "")


def test_latin1_bytes_are_undecodable() -> None:
    verdict = detect_file("legacy.txt", "Café crème, déjà vu à Noël!".encode("latin-1"))
    assert verdict.status == "undecodable" and verdict.text is None and verdict.reason


def test_too_large_and_empty() -> None:
    big = detect_file("dump.sql", b"SELECT 1;\n" * 100, max_bytes=500)
    assert big.status == "too_large" and big.size == 1000 and "500" in (big.reason or "")
    empty = detect_file("empty.md", b"")
    assert empty.status == "empty" and empty.skipped


def test_languages_by_extension_name_and_shebang() -> None:
    expected = {
        "a.py": "python",
        "b.SQL": "sql",
        "c.md": "markdown",
        "d.rst": "rst",
        "e.ts": "typescript",
        "f.tsx": "tsx",
        "g.go": "go",
        "h.java": "java",
        "i.js": "javascript",
        "Dockerfile": "dockerfile",
        "j.weird": "unknown",
    }
    for path, language in expected.items():
        assert language_for_path(path) == language, path
    assert language_for_path("bin/tool", b"#!/usr/bin/env python3\n") == "python"
    assert language_for_path("bin/run", b"#!/bin/bash\n") == "shell"
