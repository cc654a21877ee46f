"""Whether a file is worth anchoring, how to decode it and which parser it needs.

Ingesting a project folder meets images, archives, minified bundles, huge dumps and
GB18030-encoded Chinese documents; each gets a verdict instead of an exception, with the
decoded text when it is usable and a reason when it is skipped.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

__all__ = ["EXTENSION_LANGUAGES", "FileVerdict", "detect_file", "language_for_path"]

EXTENSION_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".sql": "sql",
    ".ddl": "sql",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".rst": "rst",
    ".adoc": "asciidoc",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
    ".kt": "kotlin",
    ".scala": "scala",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".ps1": "powershell",
    ".json": "json",
    ".jsonl": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".csv": "csv",
    ".tsv": "csv",
}
_FILENAME_LANGUAGES = {
    "dockerfile": "dockerfile",
    "makefile": "make",
    "readme": "text",
    "license": "text",
}
_SHEBANG = re.compile(rb"^#![^\n]*\b(python[\d.]*|bash|sh|zsh|node)\b")
_SHEBANG_LANGUAGES = {"bash": "shell", "sh": "shell", "zsh": "shell", "node": "javascript"}

# Formats recognisable by their first bytes; all need their own extraction, not decoding.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "PDF document"),
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"PK\x03\x04", "ZIP archive (or an Office document)"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\x7fELF", "ELF executable"),
    (b"MZ", "Windows executable"),
    (b"\xd0\xcf\x11\xe0", "legacy Office document"),
    (b"SQLite format 3\x00", "SQLite database"),
)
_SAMPLE_BYTES = 8192
# Bytes below 0x20 other than \t \n \f \r (and ESC, common in logs) mark binary data.
_CONTROL_BYTES = frozenset(set(range(0x20)) - {0x09, 0x0A, 0x0C, 0x0D, 0x1B, 0x08}) | {0x7F}
_MAX_CONTROL_RATIO = 0.05
# GB18030 decodes many byte strings that are not Chinese; demand mostly CJK in what it gives.
_MIN_CJK_SHARE = 0.6


@dataclass(frozen=True)
class FileVerdict:
    """What to do with one file.

    `status` is `text` (anchor `text` with the parser for `language`), `binary`,
    `too_large`, `undecodable` or `empty`; `reason` says why a file was skipped.
    """

    path: str
    language: str
    size: int
    status: str
    encoding: str | None = None
    text: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when the file decoded and should be anchored."""
        return self.status == "text"

    @property
    def skipped(self) -> bool:
        return not self.ok


def language_for_path(path: str, head: bytes = b"") -> str:
    """Language by extension, special file name or shebang line; `unknown` otherwise."""
    name = posixpath.basename(path.replace("\\", "/"))
    lowered = name.lower()
    _, extension = posixpath.splitext(lowered)
    if extension in EXTENSION_LANGUAGES:
        return EXTENSION_LANGUAGES[extension]
    stem = lowered.split(".", 1)[0]
    if stem in _FILENAME_LANGUAGES:
        return _FILENAME_LANGUAGES[stem]
    shebang = _SHEBANG.match(head)
    if shebang:
        interpreter = shebang.group(1).decode("ascii")
        return _SHEBANG_LANGUAGES.get(interpreter, "python")
    return "unknown"


def detect_file(path: str, data: bytes, max_bytes: int = 2_000_000) -> FileVerdict:
    """Decide whether `data` (the content of `path`) is text to anchor; never raises."""
    size = len(data)
    language = language_for_path(path, data[:256])
    if size > max_bytes:
        return FileVerdict(
            path, language, size, "too_large", reason=f"{size} bytes is over the {max_bytes} limit"
        )
    if size == 0:
        return FileVerdict(path, language, 0, "empty", encoding=None, text="", reason="empty file")
    binary_reason = _binary_reason(data)
    if binary_reason is not None:
        return FileVerdict(path, language, size, "binary", reason=binary_reason)
    decoded = _decode(data)
    if decoded is None:
        return FileVerdict(
            path,
            language,
            size,
            "undecodable",
            reason="not valid UTF-8 and not plausible GB18030 text",
        )
    encoding, text = decoded
    return FileVerdict(path, language, size, "text", encoding=encoding, text=text)


def _binary_reason(data: bytes) -> str | None:
    for magic, description in _MAGIC:
        if data.startswith(magic):
            return f"binary: {description}"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 with a byte order mark: NUL bytes are expected
    sample = data[:_SAMPLE_BYTES]
    if b"\x00" in sample:
        return "binary: contains NUL bytes"
    control = sum(1 for byte in sample if byte in _CONTROL_BYTES)
    if control / len(sample) > _MAX_CONTROL_RATIO:
        return f"binary: {control} control bytes in the first {len(sample)}"
    return None


def _decode(data: bytes) -> tuple[str, str] | None:
    """(encoding, text) for UTF-8 (with or without BOM), UTF-16 with BOM, or GB18030."""
    if data.startswith(b"\xef\xbb\xbf"):
        try:
            return "utf-8-sig", data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return "utf-16", data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    try:
        return "utf-8", data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return None
    non_ascii = [char for char in text if ord(char) > 0x7F]
    cjk = sum(
        1 for char in non_ascii if "\u3000" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef"
    )
    if non_ascii and cjk / len(non_ascii) < _MIN_CJK_SHARE:
        return None
    return "gb18030", text
