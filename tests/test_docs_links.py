"""Every link between the README, CHANGELOG.md and the docs/ pages resolves, offline: the file exists and, for a
link with an anchor, the target has a heading with that anchor, both as the docs site (Python-Markdown's toc) and
as GitHub name it. Links out of the repository (http, mailto) are not followed. The docs site's own build
(`make docs`, mkdocs --strict) checks the same; this test needs no mkdocs."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```\n", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*\s*$", re.M)


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose(text: str) -> str:
    """The text without code blocks and inline code, where a bracket is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def site_slug(heading: str) -> str:
    """Python-Markdown's toc slugify (the docs site)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def github_slug(heading: str) -> str:
    """GitHub's anchors for a Markdown heading (the README and pages read on GitHub)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> tuple[set[str], set[str]]:
    titles = [re.sub(r"`", "", m.group(1)) for m in HEADING.finditer(FENCE.sub("", path.read_text()))]
    return {site_slug(t) for t in titles}, {github_slug(t) for t in titles}


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(prose(path.read_text()))
            if not re.match(r"[a-z]+:", m.group(1))]


def test_the_slugs_are_the_known_ones() -> None:
    assert site_slug("Check an adapter: `duplex-eval check-adapter`".replace("`", "")) == \
        "check-an-adapter-duplex-eval-check-adapter"
    assert github_slug("The authors' layout") == site_slug("The authors' layout") == "the-authors-layout"
    assert github_slug("Rescoring: --reuse --param") == "rescoring---reuse---param"  # GitHub keeps every hyphen


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_internal_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if dest.is_dir():
            broken.append(f"{target}: a folder, not a page")
            continue
        if anchor:
            site, github = anchors(dest)
            if anchor not in site or anchor not in github:
                broken.append(f"{target}: no heading with that anchor (site: {anchor in site}, GitHub: "
                              f"{anchor in github})")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_pages_link_each_other() -> None:
    """Every docs page is reachable from the README's table of contents."""
    readme = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    missing = [p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")
               if p.resolve() not in readme and p.name != "index.md"]
    assert not missing
