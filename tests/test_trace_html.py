"""`gpuscope trace --format html` rendered by headless Chromium with networking off.

The inputs are real traces: a ResNet-50 step loop on a V100 recorded with
``profile_memory=True`` (steps, memory events on the CPU and the GPU, copies), a directory
of two ranks (the ranks side by side), a CPU-only trace of one step, torch.profiler's raw
memory timeline (a page of its own), and a CPU training loop profiled here with memory
events. What each page must show is taken from the JSON report of the same input
(``gpuscope trace --format json``), never from the HTML; the page is read back from the DOM
Chromium dumps after rendering, parsed with the standard library's ``html.parser``, and
from Chromium's screenshot, read with Pillow.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from _chromium import (
    PageParser,
    assert_not_blank,
    assert_self_contained,
    dump_dom,
    points,
    run_chromium,
    screenshot,
)
from _helpers import SHARED_DATA, gpuscope_cli
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

TRACES = SHARED_DATA / "traces"
RESNET = TRACES / "resnet50_v100_memory_workers0.json.gz"
RANKS = (TRACES / "sampled_rank0.json.gz", TRACES / "sampled_rank1.json.gz")
CPU_ONLY = TRACES / "cpu_only_rank34.json.gz"
MEMORY_TIMELINE = TRACES / "memory_timeline.raw.gz"

WINDOW = (1200, 2400)
# The CPU-only trace holds one step and one operator: its page is a heading and two
# one-row tables, which fill the top of a shorter window only.
SHORT_WINDOW = (1200, 600)

# What a step's time is split into (crates/gpuscope/src/analysis/trace/steps.rs,
# CATEGORIES): `steps.steps[].breakdown_us` lists µs in this order.
STEP_CATEGORIES = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
)
# The most characters a table cell shows of a name, and the longest name it shows whole
# (crates/gpuscope/src/render/html.rs, NAME_CHARS and SHORTEN_FROM); a longer name is
# shortened, whole in the cell's title.
NAME_CHARS = 120
WHOLE_NAME_CHARS = 100
# A name cell's height in lines of text, at most: rows of kernel names stay short.
NAME_LINES = 3
STEPS_CHART = "Step time by category (ms)"
MEMORY_CHART = "Allocated memory"
CATEGORY_CHART = "Memory by category"


# ---------------------------------------------------------------------------- inputs


def record_cpu_run(path: Path) -> None:
    """A small CPU training loop profiled with memory events: wait 1, warm up 1, record 3
    steps (ProfilerStep#2-#4), written as one chrome trace."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))

    def write(prof: profile) -> None:
        prof.export_chrome_trace(str(path))

    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=True,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=write,
    ) as prof:
        for _ in range(6):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            torch.autograd.backward(loss)
            opt.step()
            prof.step()
    assert path.is_file()


def trace_json(path: Path) -> dict[str, Any]:
    out = gpuscope_cli("trace", path, "--format", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def trace_html(path: Path, out_file: Path) -> str:
    out = gpuscope_cli("trace", path, "--format", "html", "-o", out_file)
    assert out.returncode == 0, out.stderr
    assert "panicked" not in out.stderr
    return out_file.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- chromium


# ------------------------------------------------------------------------ page model


@dataclass
class Chart:
    title: str = ""
    series: list[tuple[str, str]] = field(default_factory=list)  # (data-series, d)

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.series]


@dataclass
class Section:
    """A `<section class="rank">`, or the page outside any."""

    heading: str = ""
    h3: list[str] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)  # text of every <td>
    # Each <td class="name">: (the h3 over its table, its title or else its text, its text)
    names: list[tuple[str, str, str]] = field(default_factory=list)

    def charts_titled(self, title: str) -> list[Chart]:
        return [c for c in self.charts if c.title == title]


class TracePage(PageParser):
    """The rank sections with their headings, charts and table cells; the rest of the page
    as one more section; every element with its attributes; the text of <style>."""

    def __init__(self) -> None:
        super().__init__()
        self.page = Section()
        self.sections: list[Section] = []
        self.h1: list[str] = []
        self.h2: list[str] = []  # every h2, inside sections or not
        self._section: Section | None = None
        self._section_depth = 0
        self._chart: Chart | None = None
        self._name_cell = False  # the <td> open is a name
        self._name_title: str | None = None  # its title

    @property
    def here(self) -> Section:
        return self._section if self._section is not None else self.page

    def is_chart_title(self, tag: str) -> bool:
        """The first <title> of a chart's <svg> is the chart's; the legend's are names."""
        return tag == "title" and self._chart is not None and not self._chart.title

    def start(self, tag: str, a: dict[str, str], classes: list[str]) -> None:
        if tag == "section" and "rank" in classes:
            self._section = Section()
            self.sections.append(self._section)
            self._section_depth = self.depth
        elif tag in ("h1", "h2", "h3", "td") or self.is_chart_title(tag):
            self.capture(tag)
            if tag == "td":
                self._name_title = a.get("title") if "name" in classes else None
                self._name_cell = "name" in classes
        elif tag == "svg" and "chart" in classes:
            self._chart = Chart()
            self.here.charts.append(self._chart)
        elif tag == "path" and "series" in classes:
            assert self._chart is not None, "a series outside a chart"
            self._chart.series.append((a.get("data-series", ""), a.get("d", "")))

    def captured(self, tag: str, text: str) -> None:
        if tag == "h1":
            self.h1.append(text)
        elif tag == "h2":
            self.h2.append(text)
            if self._section is not None and not self._section.heading:
                self._section.heading = text
        elif tag == "h3":
            self.here.h3.append(text)
        elif tag == "td":
            self.here.cells.append(text)
            if self._name_cell:
                h3 = self.here.h3[-1] if self.here.h3 else ""
                full = text if self._name_title is None else self._name_title
                self.here.names.append((h3, full, text))
        elif tag == "title" and self._chart is not None:
            self._chart.title = text

    def end(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None
        if self._section is not None and self.depth < self._section_depth:
            self._section = None


def parse(source: str) -> TracePage:
    return TracePage.parse(source)


# -------------------------------------------------------------------------- fixtures


@dataclass
class Page:
    input: Path
    html: str
    doc: dict[str, Any]
    dom: str
    screenshot: Path


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cpu_run") / "cpu_memory.pt.trace.json"
    record_cpu_run(path)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, cpu_run: Path) -> dict[str, Path]:
    for path in (RESNET, *RANKS, CPU_ONLY, MEMORY_TIMELINE):
        assert path.is_file(), f"the shared trace is missing: {path}"
    ranks = tmp_path_factory.mktemp("ranks")
    for path in RANKS:
        (ranks / path.name).symlink_to(path)
    return {
        "resnet": RESNET,
        "ranks": ranks,
        "cpu_only": CPU_ONLY,
        "cpu_memory": cpu_run,
        "memory_timeline": MEMORY_TIMELINE,
    }


@pytest.fixture(scope="module")
def pages(
    chromium: str, inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Page]:
    """Each input's page: written, dumped by Chromium and photographed."""
    work = tmp_path_factory.mktemp("pages")
    out: dict[str, Page] = {}
    for name, path in inputs.items():
        html_file = work / f"{name}.html"
        source = trace_html(path, html_file)
        window = SHORT_WINDOW if name == "cpu_only" else WINDOW
        out[name] = Page(
            input=path,
            html=source,
            doc=trace_json(path),
            dom=dump_dom(chromium, html_file),
            screenshot=screenshot(chromium, html_file, window),
        )
    return out


TRACE_PAGES = ["resnet", "ranks", "cpu_only", "cpu_memory"]
ALL_PAGES = [*TRACE_PAGES, "memory_timeline"]


# ----------------------------------------------------------------------------- tests


def test_the_inputs_hold_what_the_pages_are_tested_on(pages: dict[str, Page]) -> None:
    """Guards the fixtures: the JSON the other tests judge by has steps, memory on two
    devices and copies for ResNet, two ranks in the directory, one step on the CPU-only
    trace, memory but no GPU work in the run recorded here."""
    (resnet,) = pages["resnet"].doc["ranks"]
    assert resnet["gpu_activity"] and len(resnet["steps"]["steps"]) >= 2
    assert [m["device"] for m in resnet["memory"]] == ["cpu", "cuda:0"]
    assert resnet["copies"]
    assert [r["rank"] for r in pages["ranks"].doc["ranks"]] == [0, 1]
    (cpu_only,) = pages["cpu_only"].doc["ranks"]
    assert not cpu_only["gpu_activity"] and len(cpu_only["steps"]["steps"]) == 1
    (cpu_memory,) = pages["cpu_memory"].doc["ranks"]
    assert not cpu_memory["gpu_activity"]
    assert [m["device"] for m in cpu_memory["memory"]] == ["cpu"]
    assert [s["name"] for s in cpu_memory["steps"]["steps"]] == [
        f"ProfilerStep#{i}" for i in (2, 3, 4)
    ]
    assert pages["memory_timeline"].doc["schema"] == "gpuscope.memory-timeline/1"


@pytest.mark.parametrize("name", TRACE_PAGES)
def test_each_rank_has_its_section(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    ranks = page.doc["ranks"]
    for source in (page.html, page.dom):
        dom = parse(source)
        assert dom.h1 == ["gpuscope trace"]
        assert [s.heading for s in dom.sections] == [
            f"rank {r['rank']} — {r['path']}" for r in ranks
        ]
        assert ("Ranks side by side" in dom.h2) == (len(ranks) > 1)


def test_ranks_side_by_side_lists_each_rank(pages: dict[str, Page]) -> None:
    page = pages["ranks"]
    comparison = page.doc["rank_comparison"]
    dom = parse(page.dom)
    # The page's own cells (outside the rank sections) are the comparison table's.
    rows = [dom.page.cells[i : i + 5] for i in range(0, len(dom.page.cells), 5)]
    assert [row[0] for row in rows] == [str(r["rank"]) for r in comparison["ranks"]]
    for row, rank in zip(rows, comparison["ranks"], strict=True):
        assert float(row[2]) == pytest.approx(rank["compute_us"] / 1000, abs=0.005)


@pytest.mark.parametrize("name", TRACE_PAGES)
def test_steps_chart_has_one_area_per_category_with_time(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    dom = parse(page.dom)
    for section, rank in zip(dom.sections, page.doc["ranks"], strict=True):
        steps = rank["steps"]["steps"] if rank["steps"] else []
        for step in steps:
            assert len(step["breakdown_us"]) == len(STEP_CATEGORIES)
            # Each instant goes to exactly one category.
            assert sum(step["breakdown_us"]) == pytest.approx(step["duration_us"], abs=1e-3)
        charts = section.charts_titled(STEPS_CHART)
        if len(steps) < 2:  # one step is no chart
            assert charts == [], section.heading
            continue
        (chart,) = charts
        expected = [
            c for i, c in enumerate(STEP_CATEGORIES) if any(s["breakdown_us"][i] > 0 for s in steps)
        ]
        assert chart.names == expected, section.heading
        for series, d in chart.series:
            # the top edge, one point per step, then back along the area below
            assert len(points(d)) >= len(steps), (section.heading, series)
            assert not re.search(r"nan|inf", d, re.IGNORECASE), (section.heading, series)


@pytest.mark.parametrize(
    "name",
    [
        "resnet",
        "ranks",
        "cpu_only",
        "cpu_memory",
    ],
)
def test_one_memory_chart_per_device(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    dom = parse(page.dom)
    for section, rank in zip(dom.sections, page.doc["ranks"], strict=True):
        memory = rank["memory"]
        headings = [h for h in section.h3 if h.startswith("Memory on ")]
        assert headings == [f"Memory on {m['device']} ({m['events']} events)" for m in memory]
        charts = section.charts_titled(MEMORY_CHART)
        assert len(charts) == len(memory), section.heading
        for chart, device in zip(charts, memory, strict=True):
            (d,) = [d for n, d in chart.series if n == "allocated"]
            assert chart.names == ["allocated"]
            assert len(points(d)) == len(device["timeline"]), device["device"]


@pytest.mark.parametrize("name", ["resnet", "ranks"])
def test_copies_table_has_a_row_per_direction(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    dom = parse(page.dom)
    for section, rank in zip(dom.sections, page.doc["ranks"], strict=True):
        assert rank["copies"], section.heading
        assert "Copies and memsets" in section.h3
        # direction, count, MB, GB/s, pageable: the table is the section's last
        cells = section.cells[-5 * len(rank["copies"]) :]
        rows = [cells[i : i + 5] for i in range(0, len(cells), 5)]
        want = [[c["direction"], str(c["count"]), str(c["pageable_count"])] for c in rank["copies"]]
        assert [[r[0], r[1], r[4]] for r in rows] == want


def test_memory_timeline_page_stacks_each_category_that_holds_memory(
    pages: dict[str, Page],
) -> None:
    page = pages["memory_timeline"]
    doc = page.doc
    for source in (page.html, page.dom):
        dom = parse(source)
        assert dom.h1 == ["gpuscope memory timeline"]
        assert dom.sections == []
        assert dom.h2 == [doc["path"]]
        (chart,) = dom.page.charts
        assert chart.title == CATEGORY_CHART
        expected = [
            c
            for i, c in enumerate(doc["categories"])
            if any(m["bytes"][i] > 0 for m in doc["timeline"])
        ]
        assert chart.names == expected
        for _, d in chart.series:
            assert len(points(d)) >= len(doc["timeline"])
        # one table row per category: name, MB at peak, MB at end
        assert dom.page.cells[::3] == doc["categories"]


@pytest.mark.parametrize("name", ALL_PAGES)
def test_screenshot_is_not_blank(pages: dict[str, Page], name: str) -> None:
    assert_not_blank(pages[name].screenshot)


@pytest.mark.parametrize("name", ALL_PAGES)
def test_page_is_self_contained(pages: dict[str, Page], name: str) -> None:
    for source in (pages[name].html, pages[name].dom):
        page = parse(source)
        assert_self_contained(source, page.elements, page.styles)


def check_name_is_text(page: Page, name: str, whole_cell: bool = True) -> None:
    """`name` is escaped in the file and in Chromium's serialisation of the DOM, and is
    the whole name of a table cell once parsed — its text, or its title where the text is
    shortened — (or the start of it, when the cell adds to it)."""
    assert re.search(r"[<>&]", name)
    escaped = html_lib.escape(name, quote=False)
    for source in (page.html, page.dom):
        assert name not in source
        dom = parse(source)
        names = [full for s in dom.sections for _, full, _ in s.names]
        if whole_cell:
            assert name in names
        else:
            assert any(full.startswith(name) for full in names)
        # where the cell shows the name whole, it is escaped as text
        shown = [text for s in dom.sections for _, _, text in s.names]
        if name in shown:
            assert escaped in source


def test_a_kernel_name_with_template_arguments_is_text(pages: dict[str, Page]) -> None:
    page = pages["resnet"]
    (rank,) = page.doc["ranks"]
    names = [k["name"] for k in rank["top_kernels"]]
    # A name with all of <, > and & when the table has one, else one with < and >.
    (name, *_) = sorted(
        (n for n in names if "<" in n and ">" in n),
        key=lambda n: (not all(c in n for c in "<>&"), names.index(n)),
    )
    assert "&" in name, name
    check_name_is_text(page, name)


def test_an_operator_name_with_brackets_is_text(pages: dict[str, Page]) -> None:
    page = pages["ranks"]
    rank = page.doc["ranks"][0]
    tables = [t for t in rank["operators"].values() if isinstance(t, list)]
    names = [o["name"] for table in tables for o in table]
    (name, *_) = [n for n in names if re.search(r"[<>&]", n)]
    # The by-shapes table puts the shapes after the name in the same cell.
    check_name_is_text(page, name, whole_cell=False)


# ------------------------------------------------------------------- long names


def rendered_name_lines(chromium: str, page: Path, work: Path) -> list[tuple[str, float]]:
    """(the whole name, the height of its cell in lines of text) for each name cell, as
    Chromium lays the page out at the width of the other tests' window. The page has no
    script; a copy of it gets one that writes each cell's height into the DOM, which
    Chromium then dumps."""
    measure = (
        "<script>addEventListener('load', () => {"
        "for (const td of document.querySelectorAll('td.name')) {"
        "const css = getComputedStyle(td);"
        "const inner = td.clientHeight - parseFloat(css.paddingTop)"
        " - parseFloat(css.paddingBottom);"
        "td.dataset.lines = (inner / parseFloat(css.lineHeight)).toFixed(2);"
        "}});</script>"
    )
    copy = work / f"{page.stem}.measured.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", measure + "</body>"))
    dom = run_chromium(
        chromium,
        copy.with_suffix(".profile"),
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--dump-dom",
        copy.as_uri(),
    )

    class Heights(PageParser):
        def __init__(self) -> None:
            super().__init__()
            self.cells: list[tuple[str, float]] = []
            self._lines = 0.0
            self._title: str | None = None

        def start(self, tag: str, a: dict[str, str], classes: list[str]) -> None:
            if tag == "td" and "name" in classes:
                self._lines = float(a["data-lines"])
                self._title = a.get("title")
                self.capture(tag)

        def captured(self, tag: str, text: str) -> None:
            self.cells.append((text if self._title is None else self._title, self._lines))

    cells = Heights.parse(dom).cells
    assert cells, f"no name cell measured in {page}"
    return cells


@pytest.mark.parametrize("name", ["resnet", "ranks"])
def test_long_kernel_names_are_shortened_and_whole_in_the_title(
    pages: dict[str, Page], name: str
) -> None:
    """Kernel names run to hundreds of characters (ResNet's cuDNN and ATen kernels) or
    thousands (the embedding kernels of the two ranks): each top kernel's cell shows at
    most NAME_CHARS characters, starting as the name starts (after the `void ` every
    kernel returns), with the whole name in its title; different kernels read
    differently; a name of up to WHOLE_NAME_CHARS is the cell's text, with no title."""
    page = pages[name]
    for source in (page.html, page.dom):
        dom = parse(source)
        for section, rank in zip(dom.sections, page.doc["ranks"], strict=True):
            want = [k["name"] for k in rank["top_kernels"]]
            cells = [(full, text) for h3, full, text in section.names if h3 == "Top kernels"]
            assert [full for full, _ in cells] == want, section.heading
            for full, text in cells:
                assert len(text) <= NAME_CHARS, text
                if len(full) <= WHOLE_NAME_CHARS:
                    assert text == full
                else:
                    word = full.removeprefix("void ").split("<")[0].split("(")[0]
                    assert text.startswith(word[: NAME_CHARS // 2]), (text, full)
            shown = [text for _, text in cells]
            assert len(set(shown)) == len(set(want)), shown
    longest = max(len(k["name"]) for r in page.doc["ranks"] for k in r["top_kernels"])
    assert longest > 2 * NAME_CHARS, "the input should hold a long kernel name"


def with_shapes(operator: dict[str, Any]) -> str:
    """An operator as the by-shapes table names it: with its input shapes."""
    shapes = operator.get("input_shapes")
    return f"{operator['name']} {shapes}" if shapes else str(operator["name"])


def test_operators_with_long_shapes_read_differently(pages: dict[str, Page]) -> None:
    """The by-shapes table names an operator with its input shapes, thousands of
    characters for the ranks' `forward`: two rows whose shapes differ far into the list
    still read differently, each within NAME_CHARS, whole in the title."""
    page = pages["ranks"]
    dom = parse(page.dom)
    for section, rank in zip(dom.sections, page.doc["ranks"], strict=True):
        want = [with_shapes(o) for o in rank["operators"]["by_shapes"]]
        assert max(map(len, want)) > 3 * NAME_CHARS, "the input should hold long shapes"
        title = "CPU operators by input shapes"
        cells = [(full, text) for h3, full, text in section.names if h3 == title]
        assert [full for full, _ in cells] == want, section.heading
        assert all(len(text) <= NAME_CHARS for _, text in cells)
        assert len({text for _, text in cells}) == len(set(want))


@pytest.mark.parametrize("name", ["resnet", "ranks"])
def test_rows_of_long_names_stay_a_few_lines_tall(
    chromium: str, pages: dict[str, Page], name: str, tmp_path: Path
) -> None:
    """Laid out by Chromium, no kernel or operator cell is more than NAME_LINES lines
    tall (a name of 2,000 characters wrapped into a narrow column made rows of 45)."""
    page = pages[name]
    html_file = tmp_path / f"{name}.html"
    html_file.write_text(page.html, encoding="utf-8")
    names = set()
    for rank in page.doc["ranks"]:
        names |= {k["name"] for k in rank["top_kernels"]}
        for table, operators in rank["operators"].items():
            if isinstance(operators, list):
                shown = with_shapes if table == "by_shapes" else (lambda o: str(o["name"]))
                names |= {shown(o) for o in operators}
    measured = rendered_name_lines(chromium, html_file, tmp_path)
    cells = [(full, lines) for full, lines in measured if full in names]
    assert {full for full, _ in cells} == names
    tall = [(lines, full[:80]) for full, lines in cells if lines > NAME_LINES + 0.1]
    assert tall == [], tall
