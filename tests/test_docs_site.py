"""`make docs`: the docs site builds offline with mkdocs --strict (every page in the navigation, every link and
anchor resolved, the API reference's names found in the code), the API page documents the adapter protocol, and the
site browses from disk with no network: every page link names a file (file:// shows a folder as a directory
listing), no page loads anything from the network (the theme's highlight.js came from a CDN), and a real browser
opening it from file:// requests nothing else and hits no script error (mkdocs' search worker is refused there,
which is why the site has no search box: mkdocs.yml)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("DUPLEX_EVAL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# What a page fetches (as opposed to what it links to): <script src>, <link href> (stylesheets, icons), <img src>...
ASSET_ATTRS = {("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"), ("source", "src"),
               ("audio", "src"), ("video", "src"), ("embed", "src"), ("object", "data")}
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)|@import\s+['"]([^'"]+)""")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e .[docs]; `make setup` installs it)")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra (mkdocstrings-python)")
    out = tmp_path_factory.mktemp("docs") / "site"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "NO_PROXY": "*", "http_proxy": "http://127.0.0.1:9",
                        "https_proxy": "http://127.0.0.1:9"}  # any fetch would fail: the build must need none
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


class _Refs(HTMLParser):
    """The links (<a href>) and the fetched assets of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.assets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if tag == "a" and name == "href":
                self.links.append(value)
            elif (tag, name) in ASSET_ATTRS:
                self.assets.append(value)


def refs(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def is_remote(url: str) -> bool:
    """Anything the browser would fetch over a network: a scheme other than data: / file:, or a //host URL."""
    parts = urlsplit(url.strip())
    return bool(parts.netloc) or parts.scheme not in ("", "data", "file")


def pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_the_docs_site_builds_offline_and_strict(site: Path) -> None:
    api = (site / "api.html").read_text()
    for name in ("DuplexAgent", "BatchedDuplexAgent", "Frame", "run_episode", "score_run_dir", "MPEProtocol"):
        assert name in api, name
    assert (site / "benchmarks" / "m3.html").is_file()


def test_every_page_link_opens_a_file(site: Path) -> None:
    """From disk a link to quickstart/ opens "Index of .../quickstart/", not the page: each names its .html file."""
    checked = 0
    for page in pages(site):
        if page.name == "404.html":  # a web server's page for a missing URL (links from the site root): never on disk
            continue
        for href in refs(page).links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or not parts.path:  # another site, or an anchor on this page
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_file(), f"{page.relative_to(site)}: link {href!r} opens no file ({target})"
            checked += 1
    assert checked > 100  # every page's navigation at least


def test_no_page_loads_anything_from_the_network(site: Path) -> None:
    remote = [f"{page.relative_to(site)}: {url}" for page in pages(site) for url in refs(page).assets if is_remote(url)]
    for css in site.rglob("*.css"):
        for m in CSS_URL.finditer(css.read_text(encoding="utf-8", errors="replace")):
            url = m.group(1) or m.group(2)
            if is_remote(url):
                remote.append(f"{css.relative_to(site)}: {url}")
    assert not remote, remote


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}: `make setup` installs Debian's chromium (the Makefile's APT_PKGS)")
    from playwright import sync_api  # the dev extra: installed wherever chromium is

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


def test_the_site_browses_from_disk_in_a_browser(site: Path, browser: Any) -> None:
    """Open index.html from file://, follow the navigation to the Quickstart and a benchmark page: every request
    stays on disk (any other is refused and recorded), every page renders its heading and no script fails."""
    context = browser.new_context()
    remote: list[str] = []
    errors: list[str] = []

    def only_disk(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            remote.append(route.request.url)
            route.abort()

    context.route("**/*", only_disk)
    pg = context.new_page()
    pg.on("pageerror", lambda err: errors.append(str(err)))
    pg.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
    pg.goto((site / "index.html").as_uri(), wait_until="load")
    pg.click(".wy-menu-vertical a:text-is('Quickstart')")
    pg.wait_for_load_state("load")
    assert pg.url == (site / "quickstart.html").as_uri()
    assert pg.inner_text("h1").strip().startswith("Quickstart")
    pg.goto((site / "benchmarks" / "m3.html").as_uri(), wait_until="load")
    pg.click(".wy-menu-vertical a:text-is('Scoring')")  # a link one folder up
    pg.wait_for_load_state("load")
    assert pg.url == (site / "scoring.html").as_uri()
    assert pg.locator("div.codehilite span[style]").count() > 0  # code coloured at build time, no script needed
    context.close()
    assert not remote, remote
    assert not errors, errors
