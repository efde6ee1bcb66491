"""Run the Python code blocks of README.md and docs/*.md.

Every ```python block of a page runs, in order, in one namespace per page
(so a block may use what an earlier block of the same page defined), in a
fresh working directory. A block preceded by a ``<!-- skip -->`` line is not
run; ```bash / ```text blocks never are. Blocks check themselves with
``assert``.
"""
from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
_FENCE = re.compile(r"^```(\w*)\s*$")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, code) of each python block not marked ``<!-- skip -->``."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i].strip())
        if m is None:
            i += 1
            continue
        lang = m.group(1).lower()
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        start = i + 1
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if lang in ("python", "py") and prev != "<!-- skip -->":
            blocks.append((start + 1, "\n".join(lines[start:i])))
        i += 1
    return blocks


def test_block_finder():
    text = "a\n```python\nx = 1\n```\n<!-- skip -->\n```python\nraise SystemExit\n```\n```bash\nls\n```\n"
    assert python_blocks(text) == [(3, "x = 1")]


@pytest.mark.parametrize("page", PAGES, ids=[os.path.relpath(p, ROOT) for p in PAGES])
def test_page_code_blocks_run(page, tmp_path, monkeypatch):
    if not os.path.exists(page):
        pytest.fail(f"{page} is missing")
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    blocks = python_blocks(text)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for line, code in blocks:
        try:
            exec(compile(code, f"{os.path.relpath(page, ROOT)}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{os.path.relpath(page, ROOT)}, block at line {line}: "
                                 f"{type(exc).__name__}: {exc}") from exc


def test_every_docs_page_has_a_runnable_example():
    for page in PAGES[1:]:
        with open(page, encoding="utf-8") as fh:
            assert python_blocks(fh.read()), f"{page} has no runnable python block"


def test_relative_links_point_to_existing_files():
    link = re.compile(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)")
    for page in PAGES:
        if not os.path.exists(page):
            continue
        with open(page, encoding="utf-8") as fh:
            text = fh.read()
        base = os.path.dirname(page)
        for target in link.findall(text):
            assert os.path.exists(os.path.join(base, target)), f"{page}: broken link {target}"


def test_index_links_every_page():
    """Every page of the guide is reachable from docs/index.md (the README links the index)."""
    with open(os.path.join(ROOT, "docs", "index.md"), encoding="utf-8") as fh:
        index = fh.read()
    for page in PAGES[1:]:
        name = os.path.basename(page)
        if name != "index.md":
            assert f"]({name})" in index, f"docs/index.md does not link {name}"
    assert os.path.join(ROOT, "docs", "datastream.md") in PAGES  # its blocks run like every page's
