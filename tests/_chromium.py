"""Headless Chromium (Debian's `chromium`, installed by `make chromium`) for the HTML tests:
run with networking off, dump the DOM after rendering, take a screenshot; and the patterns
the tests use to check that a page fetches nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Self

import pytest

CHROMIUM_TIMEOUT = 60.0

FETCHING_ATTRIBUTES = {"src", "href", "xlink:href", "srcset", "poster", "data", "action"}
EXTERNAL = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)|@import\s+(['\"])(.*?)\3", re.IGNORECASE)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
POINT = re.compile(r"[ML](-?[0-9.]+),(-?[0-9.]+)")


def points(d: str) -> list[tuple[float, float]]:
    """The points of an SVG path's `d`."""
    return [(float(x), float(y)) for x, y in POINT.findall(d)]


def network_off() -> tuple[list[str], list[str]]:
    """(command prefix, extra Chromium flags) that keep Chromium off the network: a fresh
    network namespace (``unshare --net`` as root, else ``unshare -rn``), or, where none can
    be made, host names that never resolve and a proxy nothing listens on."""
    for prefix in (["unshare", "--net"], ["unshare", "-rn"]):
        if shutil.which(prefix[0]) is None:
            continue
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
        if probe.returncode == 0:
            return prefix, []
    return [], ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]


def find_chromium() -> str:
    """The chromium binary; skips the test when it is not installed."""
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("Debian's chromium is not installed (make chromium installs it)")
    return found


def run_chromium(chromium: str, profile_dir: Path, *args: str) -> str:
    """Runs headless Chromium with networking off and a fresh profile; its stdout."""
    prefix, flags = network_off()
    cmd = [
        *prefix,
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={profile_dir}",
        *flags,
        *args,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT, check=False)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}:\n{out.stderr[-3000:]}"
    return out.stdout


def dump_dom(chromium: str, page: Path) -> str:
    """The DOM after rendering, as Chromium serialises it."""
    dom = run_chromium(chromium, page.with_suffix(".dom-profile"), "--dump-dom", page.as_uri())
    assert "<html" in dom, dom[:500]
    return dom


def screenshot(chromium: str, page: Path, window: tuple[int, int]) -> Path:
    """A screenshot of the page in a window of `window` pixels."""
    png = page.with_suffix(".png")
    run_chromium(
        chromium,
        page.with_suffix(".shot-profile"),
        f"--screenshot={png}",
        f"--window-size={window[0]},{window[1]}",
        "--hide-scrollbars",
        page.as_uri(),
    )
    assert png.is_file(), f"Chromium wrote no screenshot of {page}"
    return png


# Elements that load something from elsewhere; a self-contained page has none.
LOADING_TAGS = ("script", "link", "img", "iframe", "object", "embed", "audio", "video", "source")


def assert_self_contained(
    source: str,
    elements: Sequence[tuple[str, Sequence[tuple[str, str | None]]]],
    styles: Sequence[str],
) -> None:
    """No script, nothing fetched: no element that loads something, no event handler, no
    attribute pointing elsewhere, no CSS url() or @import, no http(s) URL anywhere in
    ``source`` (the page's ``elements`` and ``styles`` as a parser found them)."""
    tags = [tag for tag, _ in elements]
    for tag in LOADING_TAGS:
        assert tag not in tags, f"<{tag}> in a page that should need nothing else"
    for tag, attrs in elements:
        for key, value in attrs:
            value = value or ""
            assert not key.startswith("on"), (tag, key)
            if key in FETCHING_ATTRIBUTES:
                assert not EXTERNAL.match(value), (tag, key, value)
                assert not value.lower().startswith(("http:", "https:")), (tag, key, value)
            fetched = [m.group(0) for m in CSS_URL.finditer(value)]
            assert fetched == [], (tag, key, fetched)
    for css in styles:
        fetched = [m.group(0) for m in CSS_URL.finditer(css)]
        assert fetched == [], fetched
    urls = re.findall(r"https?://[^\s\"'<>)]+", source)
    assert urls == [], urls


def assert_not_blank(png: Path, size: tuple[int, int] | None = None) -> None:
    """More than 5 % of the screenshot's pixels differ from its most common colour (the
    background); with ``size``, the screenshot has that size."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
    if size is not None:
        assert rgb.size == size
    total = rgb.size[0] * rgb.size[1]
    colours = rgb.getcolors(maxcolors=total)
    assert colours is not None
    background_count, background = max(colours)
    other = total - background_count
    assert other / total > 0.05, f"{other / total:.1%} of pixels differ from {background}"


class PageParser(HTMLParser):
    """What every page test reads: each element with its attributes, the text of <style>,
    and the open elements. Subclasses say which elements start something (``start``),
    which elements' text they want (``capture(tag)`` from ``start``, then ``captured``) and
    what an element's end closes (``end``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.styles: list[str] = []
        self._stack: list[str] = []
        self._capture: str | None = None  # the tag whose text is being gathered
        self._text: list[str] = []

    @classmethod
    def parse(cls, source: str) -> Self:
        parser = cls()
        parser.feed(source)
        parser.close()
        return parser

    @property
    def depth(self) -> int:
        """How many elements are open."""
        return len(self._stack)

    def start(self, tag: str, a: dict[str, str], classes: list[str]) -> None:
        """An element (not a void one) opened; ``a`` its attributes."""

    def captured(self, tag: str, text: str) -> None:
        """The text of an element ``capture`` asked for, at its end."""

    def end(self, tag: str) -> None:
        """An element closed (after ``captured``)."""

    def capture(self, tag: str) -> None:
        self._capture, self._text = tag, []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))
        if tag in VOID:
            return
        self._stack.append(tag)
        a = {k: v or "" for k, v in attrs}
        if tag == "style":
            self.capture(tag)
        self.start(tag, a, a.get("class", "").split())

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == self._capture:
            text = "".join(self._text)
            self._capture = None
            if tag == "style":
                self.styles.append(text)
            else:
                self.captured(tag, text)
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass
        self.end(tag)
