"""Fenced code blocks in agent messages, language guessing, and the parse dispatcher."""

from __future__ import annotations

from ctxbase.anchor.fenced import extract_code_blocks, guess_language, parse_code

MESSAGE = """Here is the fix:

```python
def total(lines):
    return sum(line.price for line in lines)
```

And the query, untagged:

~~~
SELECT id, total FROM orders WHERE user_id = 7
~~~

1. Then run:
   ```
   import os
   print(os.getcwd())
   ```
````markdown
```sql
SELECT 1
```
````
"""


def test_blocks_are_found_with_languages_and_offsets() -> None:
    blocks = extract_code_blocks(MESSAGE)
    assert [block.language for block in blocks] == ["python", "sql", "python", "markdown"]
    assert [block.tagged for block in blocks] == [True, False, False, True]
    first = blocks[0]
    assert first.code == "def total(lines):\n    return sum(line.price for line in lines)"
    assert MESSAGE[first.code_start : first.code_end] == first.code
    assert MESSAGE[first.start : first.end].startswith("```python")
    assert MESSAGE[first.start : first.end].endswith("```")
    assert (first.start_line, first.end_line) == (3, 6)
    # An indented fence inside a list item: the indentation is removed from the code.
    assert blocks[2].code == "import os\nprint(os.getcwd())"
    # A longer fence contains a shorter one.
    assert blocks[3].code == "```sql\nSELECT 1\n```"
    assert all(block.closed for block in blocks)


def test_unclosed_fence_runs_to_the_end() -> None:
    (block,) = extract_code_blocks("Partial reply:\n```sql\nSELECT *\nFROM orders")
    assert block.closed is False
    assert block.code == "SELECT *\nFROM orders"
    assert block.language == "sql"


def test_text_without_fences_has_no_blocks() -> None:
    assert extract_code_blocks("no code here, just ``inline`` ticks") == []


def test_guess_language() -> None:
    assert guess_language("import json\nprint(json.dumps({}))") == "python"
    assert guess_language("UPDATE users SET name = 'x' WHERE id = 1") == "sql"
    # Python that carries SQL in a string is still Python.
    assert guess_language('cur.execute("SELECT * FROM t")\nreturn cur') != "sql"
    assert guess_language('import sqlite3\ncur.execute("SELECT * FROM t")') == "python"
    assert guess_language("package main\n\nfunc main() {}\n") == "go"
    assert guess_language("const x = require('fs');") == "javascript"
    assert guess_language("just a sentence.") == "text"


def test_parse_code_dispatches_by_language() -> None:
    assert parse_code("def f():\n    pass\n", "py").parser == "python_ast"
    sql = parse_code("SELECT a FROM t", "postgresql")
    assert sql.parser == "sqlglot" and sql.properties["dialect"] == "postgres"
    assert parse_code("# Title\n\ntext\n", "md").parser == "markdown"
    guessed = parse_code("SELECT id FROM users WHERE id = 1", None)
    assert guessed.language == "sql"
    other = parse_code("fn main() {}", "rust")
    assert other.fallback is True and other.parser == "plain_text" and other.language == "rust"
    assert parse_code("function f() { return 1 }", "js").language == "javascript"


def test_an_untagged_block_with_full_width_punctuation_is_python() -> None:
    code = "def pay（user_id，amount）：\n    return amount\n"
    assert guess_language(code) == "python"
    (fn,) = [u for u in parse_code(code, None).units if u.kind == "function"]
    assert fn.name == "pay"
