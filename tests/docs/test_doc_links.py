"""Every relative link in README.md, BENCHMARKS.md and docs/*.md points at a file that
exists, and every `#anchor` at a heading of that file (GitHub's anchor rule)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) outside code: inline links; a target ends at whitespace or `)`
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for a page's headings (duplicates get -1, -2, …)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"^#{1,6} (.*)$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    # a link whose text is code (`[`x`](y)`) keeps its target; code elsewhere is no link
    text = _CODE.sub(lambda m: m.group(0) if "](" in m.group(0) else "``", text)
    return _LINK.findall(text)


def broken(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)} → {target}"
        if not resolved.exists():
            problems.append(f"{where}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where}: no heading with that anchor")
    return problems


def test_the_pages_have_links_to_check() -> None:
    readme = links(ROOT / "README.md")
    assert "docs/layout.md" in readme and "docs/snapshot.md" in readme


def test_every_relative_link_resolves() -> None:
    assert [p for page in PAGES for p in broken(page)] == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad](#nowhere)\n", encoding="utf-8")
    found = [p.split(": ", 1)[1] for p in broken(page, tmp_path)]
    assert found == ["no such file", "no heading with that anchor"]
