"""`compat site` without a browser: pages, links, legend, causes and fixes, exports, the budget
and the atomic swap."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sqlite3
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import pytest
import yaml

from compat.emit import site as site_mod
from compat.emit.site import (
    BUDGET_PAGE,
    BUDGET_PAGES_AND_JSON,
    SiteReport,
    build_site,
    cell_id,
    evidence_links,
    git_ref,
    release_key,
)
from compat.emit.site_data import FORMAT, rows_of_document
from compat.errors import UserError
from compat.resources import schema_dir
from tests import cli_kit

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "site" / "fixture_db.py"
PAGES = FIXTURE.with_name("pages.py")
GLM_CELL = "cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-mtp"
GLM_PAGE = "recipes/zai-org/GLM-5.2.html"
MODEL_PY = "https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/config/model.py#L1200"
SPEC_PY = "https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/config/speculative.py#L955"
RECIPES_BLOB = "https://github.com/vllm-project/recipes/blob/main"
V_VERDICT = ["vllm_version", "platform", "hardware", "recipe", "model_id", "variant", "strategy",
             "feature", "mode", "status", "message", "reason", "evidence"]
# Appended after the contract's columns (DESIGN.md: add only at the end): cause and fix.
V_VERDICT_APPENDED = ["cause_kind", "cause", "works_from", "fix_kind", "fix"]
V_ARCH = ["vllm_version", "platform", "arch", "class_path", "file", "line", "supports_pp",
          "supports_lora", "supports_multimodal", "supports_encoder_tp_data", "is_hybrid",
          "has_inner_state", "is_attention_free", "supports_transcription", "is_pooling_model",
          "is_text_generation_model", "supports_eagle3", "is_moe"]


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fixture_db = load("site_fixture_db", FIXTURE)
pages = load("site_pages", PAGES)
index_entries, index_row, recipe_cells = pages.index_entries, pages.index_row, pages.recipe_cells
the_cell, notes_of_cell, text_of = pages.the_cell, pages.notes_of_cell, pages.text_of
said_once = pages.said_once


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, SiteReport]:
    tmp = tmp_path_factory.mktemp("site")
    db = fixture_db.build(tmp / "compat.db")
    out = tmp / "out"
    return db, out, build_site(db, out)


@pytest.fixture(scope="module")
def out(built) -> Path:
    return built[1]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


class Refs(HTMLParser):
    """Collects (tag, attribute, value) for every URL-bearing attribute, and every id."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src", "action", "data") and v is not None:
                self.refs.append((tag, k, v))
            if k == "id" and v:
                self.ids.append(v)


def refs_of(path: Path) -> Refs:
    p = Refs()
    p.feed(read(path))
    return p


# ---------------------------------------------------------------------------- pages


def test_report_counts_pages_bytes_and_time(built):
    _db, out, report = built
    html = sorted(out.rglob("*.html"))
    views = ["index.html", "index-0.23.0.html", "index-0.33.0.html"]
    assert report.pages == len(html) == len(views) + len(fixture_db.RECIPES)
    assert report.bytes == sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert report.pages_and_json_bytes == sum(p.stat().st_size for p in out.rglob("*")
                                              if p.suffix in (".html", ".json"))
    largest = max(html, key=lambda p: p.stat().st_size)
    assert report.largest_page_bytes == largest.stat().st_size
    assert report.largest_page == largest.relative_to(out).as_posix()
    assert report.database_bytes == (out / "compat.db.gz").stat().st_size
    assert 0 < report.seconds < 30
    assert "compat.db.gz" in report.summary() and "largest page" in report.summary()


def test_pages_exist_per_recipe(out):
    assert (out / "index.html").is_file()
    for recipe in fixture_db.RECIPES:
        _models, provider, name = recipe.split("/")
        assert (out / "recipes" / provider / name.replace(".yaml", ".html")).is_file()
    for f in ("compat.db.gz", "verdicts.json", "metadata.yaml", "static/site.css",
              "static/site.js", "index-0.23.0.html", "index-0.33.0.html"):
        assert (out / f).is_file(), f
    assert not (out / "compat.db").exists()  # shipped gzipped only
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".compat-site"]


def test_legend_is_readable_without_colour(out):
    for page in (out / "index.html", out / GLM_PAGE):
        html = read(page)
        start = html.index('class="legend"')
        legend = html[start:html.index("</section>", start)]
        for symbol, word in (("✓", "ok"), ("✗", "blocked"), ("!", "warning"), ("?", "unknown")):
            shown = rf'aria-label="{word}">{re.escape(symbol)}</span> <strong>{word}</strong>'
            assert re.search(shown, legend), (page.name, word)
    css = read(out / "static/site.css")
    for symbol, word in (("✓", "ok"), ("✗", "blocked"), ("!", "warning"), ("?", "unknown")):
        # index entries get their symbol from CSS, with the status word as its alternative
        rule = f'content: "{symbol}"; content: "{symbol}" / "{word}: "; }}'
        assert f".e.s-{word}::before {{ {rule}" in css


def test_index_lists_counts_and_entries(out, built):
    html = read(out / "index.html")
    con = sqlite3.connect(built[0])
    recipes = {r[0] for r in con.execute("SELECT recipe FROM verdict")}
    con.close()
    assert html.count('<tr class="r"') == len(recipes)
    assert re.search(r"<strong>blocked</strong>[^<]*<span class=\"count\">\(\d+\)</span>", html)
    entries = index_entries(html)
    glm = entries[GLM_CELL]
    assert glm["status"] == "blocked" and glm["label"] == "spec_decoding:mtp"
    # the base command and modeless features are listed too
    assert "cell-zai-org-glm-5.2-single_node_tp-base" in entries
    assert "cell-zai-org-glm-5.2-single_node_tp-tool_calling" in entries
    # every id site.js gives an entry is the permalink id site.js gives a cell on the recipe page
    pinned = pages.pinned_cell_ids(read(out / GLM_PAGE))
    for cid in (c for c in entries if c.startswith("cell-zai-org-glm-5.2-")):
        assert cid in pinned, cid
    # a recipe pinned to another release shows that release
    assert "vLLM 0.33.0 · pinned" in index_row(html, "Qwen3-Next-80B-A3B-Instruct")
    assert "vLLM 0.23.0 · pinned" in index_row(html, "GLM-5.2")


def test_index_marks_mixed_and_gated_entries(out):
    entries = index_entries(read(out / "index.html"))
    mixed = entries["cell-zai-org-glm-5.2-single_node_tp-spec_decoding-mtp"]
    assert mixed["status"] == "warning" and mixed["marks"] == "*"
    assert mixed["title"].startswith("Warning on 2 of 4 variant/hardware combinations; "
                                     "cause: hardware_overrides.mi355x")
    gated = entries["cell-qwen-qwen3-235b-a22b-multi_node_tp_pp-spec_decoding-eagle3"]
    assert gated["marks"] == "g" and gated["hint"] == "gated"
    assert "the recipe already gates this combination" in gated["title"]


def test_index_shows_cause_fix_and_first_working_release(out):
    """Blocked entries say the fix kind and the bisected first release; the row lists causes."""
    html = read(out / "index.html")
    glm = index_entries(html)[GLM_CELL]
    assert glm["hint"] == "fix: pin_bump · works from 0.30.0"
    assert glm["title"] == "Cause: spec_decoding:mtp."
    row = index_row(html, "GLM-5.2")
    why = re.search(r'<details class="why">(.*?)</details>', row, re.S).group(1)
    summary = re.search(r"<summary>(.*?)</summary>", why).group(1)
    assert re.findall(r'<span class="n s-(\w+)">(\d+) \w+</span>', summary) == [
        ("blocked", "5"), ("warning", "1")]
    causes = [text_of(li) for li in re.findall(r"<li class=\"s-\w+\">(.*?)</li>", why)]
    assert causes[0].startswith("spec_decoding:mtp ") or causes[0].startswith("the pinned release")
    mtp = next(c for c in causes if c.startswith("spec_decoding:mtp"))
    assert "fix (pin_bump): min_vllm_version 0.23.0 -> 0.30.0" in mtp
    assert mtp.endswith("Works from 0.30.0")
    dspark = next(c for c in causes if c.startswith("the pinned release"))
    assert "no automatic fix: pin_bump: multi_node_tp_pp with spec_decoding:dspark" in dspark
    # no fix at all: the entry says so
    llama = index_entries(html)["cell-meta-llama-llama-3.3-70b-instruct-multi_node_dep-base"]
    assert llama["hint"] == "no fix"


def test_blocked_only_off_to_the_right_shows_in_the_first_column(out):
    """Kimi-K2.5 is blocked only on multi_node_tp_pp and pd_cluster: its row header says so."""
    html = read(out / "index.html")
    row = index_row(html, "Kimi-K2.5")
    assert '<span class="n s-blocked">2 blocked</span>' in row
    head = re.search(r'<th scope="row".*?</th>', row, re.S).group(0)
    assert "multi_node_tp_pp, pd_cluster" in text_of(head)
    assert "gate spec_decoding off multi_node_tp_pp, pd_cluster" in text_of(head)
    assert 'class="offscreen right"' in html  # the cue site.js fills in


def test_index_words_a_pin_that_was_not_scanned(out):
    """Kimi-K2.5 pins 0.12.0, not scanned: the newest is shown, and the row says why."""
    row = index_row(read(out / "index.html"), "Kimi-K2.5")
    assert "vLLM 0.33.0 · pin not scanned, newest shown" in row
    assert "no pin" not in row
    page = read(out / "recipes/moonshotai/Kimi-K2.5.html")
    assert "pins no scanned release; showing the newest" in page


def test_index_release_selector_and_release_pages(out):
    html = read(out / "index.html")
    nav = re.search(r'<nav class="releases".*?</nav>', html, re.S).group(0)
    assert re.findall(r'<a href="([^"]+)" data-view="([^"]+)"', nav) == [
        ("index.html", "pinned"), ("index-0.23.0.html", "0.23.0"), ("index-0.33.0.html", "0.33.0")]
    assert 'aria-current="true">each recipe&#39;s pin' in nav
    # each recipe judged at both releases: a release view is no narrowing of this one
    assert "data-narrows" not in nav and 'data-release="' not in html
    later = read(out / "index-0.33.0.html")
    assert 'data-view="0.33.0"' in later and "at vLLM 0.33.0</h1>" in later
    assert index_entries(later)[GLM_CELL]["status"] == "ok"  # works at 0.33.0
    earlier = read(out / "index-0.23.0.html")
    assert index_entries(earlier)[GLM_CELL]["status"] == "blocked"
    assert "Qwen3-Next-80B-A3B-Instruct" not in earlier  # judged at 0.33.0 only
    assert "Qwen3-Next-80B-A3B-Instruct" in later


def test_a_release_view_that_narrows_the_pinned_index_has_no_page(tmp_path):
    """Judged each at its pin, a recipe is on index.html at the release its index-<release>.html
    would show it at: the release selector narrows index.html (issue 18), no page repeats it."""
    db = fixture_db.pinned_like(tmp_path / "in.db")
    out = tmp_path / "out"
    report = build_site(db, out)
    assert sorted(p.name for p in out.glob("index*.html")) == ["index.html"]
    assert report.pages == 1 + len(fixture_db.RECIPES)
    html = read(out / "index.html")
    nav = re.search(r'<nav class="releases".*?</nav>', html, re.S).group(0)
    assert re.findall(r'<a href="([^"]+)" data-view="([^"]+)"( data-narrows)?', nav) == [
        ("index.html", "pinned", ""), ("index.html#release=0.23.0", "0.23.0", " data-narrows"),
        ("index.html#release=0.33.0", "0.33.0", " data-narrows")]
    assert 'data-release="0.23.0"' in index_row(html, "GLM-5.2")
    assert 'data-release="0.33.0"' in index_row(html, "Qwen3-Next-80B-A3B-Instruct")


def test_recipe_page_shows_reason_message_evidence_and_works_from(out):
    html = read(out / GLM_PAGE)
    assert f'href="{MODEL_PY}"' in html
    assert f'href="{SPEC_PY}"' in html
    cell = the_cell(html, "0.23.0", "default", "multi_node_tp_pp", "spec_decoding-mtp")
    [n] = notes_of_cell(html, cell)
    assert "Pipeline parallelism is not supported for this model. Supported models implement the " \
           "`SupportsPP` interface." in n
    assert "works from 0.30.0" in n
    for step in fixture_db.PP_CHAIN:
        assert f"<li>{step.replace(chr(39), '&#39;').replace(chr(34), '&#34;')}</li>" in n
    # site.js gives the permalink id to the cell at the pinned release; every copy is a cell it
    # names
    assert GLM_CELL in pages.pinned_cell_ids(html)
    copies = [c for c in recipe_cells(html) if (c["strategy"], c["fm"]) == ("multi_node_tp_pp",
                                                                           "spec_decoding-mtp")]
    assert len(copies) == 3 + 3  # 3 variants x 2 releases
    # both releases, the pinned one selected by default
    assert 'data-default="0.23.0"' in html and 'data-slug="zai-org-glm-5.2"' in html
    assert 'id="release=0.23.0"' in html and 'id="release=0.33.0"' in html
    later = the_cell(html, "0.33.0", "default", "multi_node_tp_pp", "spec_decoding-mtp")
    assert "was blocked at 0.23.0" in later["text"]


def test_recipe_cell_names_cause_fix_and_first_working_release(out):
    html = read(out / GLM_PAGE)
    cell = the_cell(html, "0.23.0", "default", "multi_node_tp_pp", "spec_decoding-mtp")
    assert cell["class"] == "p s-blocked"
    assert cell["hints"] == ["spec_decoding:mtp fix: pin_bump · works from 0.30.0"]
    [n] = notes_of_cell(html, cell)
    link = f'<a href="{RECIPES_BLOB}/models/zai-org/GLM-5.2.yaml#L60">'
    assert link + "models/zai-org/GLM-5.2.yaml:60</a>" in n
    assert "<code>features.spec_decoding.modes.mtp</code>" in n
    assert "Fix (pin_bump)</span> min_vllm_version 0.23.0 -&gt; 0.30.0" in n
    # two causes: both named, each with its fix or why there is none
    dspark = the_cell(html, "0.23.0", "default", "multi_node_tp_pp", "spec_decoding-dspark")
    [n] = notes_of_cell(html, dspark)
    assert "the pinned release" in n and "spec_decoding:dspark" in n
    assert n.count('<span class="lbl">No automatic fix</span>') == 2
    assert "pin_bump: multi_node_tp_pp with spec_decoding:dspark starts at no release" in n
    assert dspark["hints"] == ["the pinned release no automatic fix"]  # no works_from
    # a blocked cell without a fix says so
    llama = read(out / "recipes/meta-llama/Llama-3.3-70B-Instruct.html")
    cell = the_cell(llama, "0.23.0", "default", "multi_node_dep", "base")
    assert cell["hints"] == ["multi_node_dep no automatic fix"]
    assert "the strategy is the recipe&#39;s own choice" in notes_of_cell(llama, cell)[0]


def test_a_section_writes_a_hint_once_and_site_js_shows_it_at_every_cell(out):
    """Cells citing the same note share its hint: the first carries it (span.cz data-n), the
    others only cite the note, and pages.recipe_cells gives them the hint as site.js does."""
    html = read(out / GLM_PAGE)
    section = [c for c in recipe_cells(html) if "0.23.0" in c["releases"]]
    cells = [c for c in section if c["class"] == "p s-blocked"]
    written = [c for c in cells if '<span class="cz"' in c["body"]]
    assert cells and all(c["hints"] for c in cells)
    assert len(written) < len(cells)
    for n in {n for c in cells for n in re.findall(r'href="#note-(\d+)"', c["body"])}:
        first = next(c for c in section if f'href="#note-{n}"' in c["body"])
        assert re.search(rf'<span class="cz" data-n="[^"]*\b{n}\b', first["body"]), n


def test_what_notes_share_is_said_once(out):
    """A finding, error, command or cause is written once per page, under Said once; notes cite
    it by id, and the release a text names is a variable site.js fills in."""
    html = read(out / GLM_PAGE)
    said = said_once(html)
    assert html.count("Pipeline parallelism is not supported for this model.") == 1
    assert len(set(said.values())) == len(said)
    cell = the_cell(html, "0.23.0", "default", "multi_node_tp_pp", "spec_decoding-mtp")
    raw = re.search(r'<li class="note [^"]*" id="note-(\d+)".*?</li>\n',
                    html[html.index('<section class="notes-all"'):], re.S)
    assert raw and '<a href="#t' in raw.group(0)
    # PP_REASON names the release it was judged at: a variable, filled with the release shown
    assert any('vLLM <var class="rel">release</var> copies' in t for t in said.values())
    [n] = notes_of_cell(html, cell)
    assert "vLLM 0.23.0 copies the target&#39;s pipeline-parallel size" in n


def test_releases_that_read_the_same_share_a_section(out):
    """Kimi-K2.5 reads the same at both releases: one table, both releases in the selector."""
    html = read(out / "recipes/moonshotai/Kimi-K2.5.html")
    assert html.count('<section class="rel"') == 1
    assert 'data-releases="0.23.0 0.33.0"' in html and ">vLLM 0.23.0, 0.33.0" in html
    nav = re.search(r'<nav class="releases".*?</nav>', html, re.S).group(0)
    assert re.findall(r'href="#release=([^"]+)"', nav) == ["0.23.0", "0.33.0"]


@pytest.mark.parametrize(("text", "said"), [
    ("flag --nnodes does not exist in vLLM 0.11.0", "flag --nnodes does not exist in vLLM \x00"),
    ("vLLM 0.11.0's argv rewrite", "vLLM \x00's argv rewrite"),
    ("ends in vLLM 0.11.0.", "ends in vLLM \x00."),
    ("not vLLM 0.11.01 nor vLLM 0.11.0.1", "not vLLM 0.11.01 nor vLLM 0.11.0.1"),
    ("a release list (0.33.0, 0.11.0, 0.4.2)", "a release list (0.33.0, 0.11.0, 0.4.2)"),
])
def test_a_text_names_its_release_as_a_variable(text, said):
    assert site_mod.unversioned(text, "0.11.0") == said
    assert site_mod.RELEASE_MARK == "\x00"


def test_release_runs():
    order = ["0.10.0", "0.11.0", "0.11.1", "0.12.0", "0.14.1", "0.17.0"]
    assert site_mod.release_runs(["0.11.0", "0.11.1", "0.12.0", "0.17.0"], order) == \
        "0.11.0–0.12.0, 0.17.0"
    assert site_mod.release_runs(["0.17.0", "0.10.0", "0.11.0"], order) == \
        "0.10.0, 0.11.0, 0.17.0"


def test_pd_pools_saying_the_same_are_said_together():
    cited = site_mod.Cited
    both = [cited("note", "prefill: ", "t1"), cited("blocked", "prefill: ", "t2"),
            cited("note", "decode: ", "t1"), cited("blocked", "decode: ", "t2")]
    assert site_mod.pools_together(both) == [cited("note", "prefill, decode: ", "t1"),
                                             cited("blocked", "prefill, decode: ", "t2")]
    differ = both[:3]
    assert site_mod.pools_together(differ) == differ
    follower = [*both, cited("blocked", "prefill worker 1: ", "t3")]
    assert site_mod.pools_together(follower) == follower
    assert site_mod.pools_together([cited("", "", "t1")]) == [cited("", "", "t1")]


def test_recipe_page_shows_platform_differences(out):
    html = read(out / GLM_PAGE)
    cell = the_cell(html, "0.23.0", "default", "single_node_tp", "spec_decoding-mtp")
    assert cell["class"] == "mixed s-warning"
    assert "rocm: mi355x" in cell["text"] and "cuda" in cell["text"]
    assert any("MTP on ROCm falls back to the Triton attention backend" in n
               for n in notes_of_cell(html, cell))


def test_hardware_profiles_a_row_stands_for_are_named(out):
    """A row with hardware '' stands for the profiles in verdict.profiles; the page lists them."""
    html = read(out / "recipes/moonshotai/Kimi-K2.5.html")
    assert "cuda: b200, b300, gb200, gb300, h100, h200; rocm: mi300x, mi355x" in html


def test_evidence_without_line_links_the_file(out):
    """A note said at several releases links its evidence at the first (site.js points the links
    at the release shown: test_site_browser)."""
    html = read(out / "recipes/meta-llama/Llama-3.3-70B-Instruct.html")
    blob = "https://github.com/vllm-project/vllm/blob"
    [n] = notes_of_cell(html, the_cell(html, "0.33.0", "default", "multi_node_dep", "base"))
    assert '<p class="at">vLLM 0.23.0, 0.33.0 · variant default (cuda)</p>' in n
    assert f'href="{blob}/v0.23.0/vllm/config/parallel.py"' in n
    assert f'href="{blob}/v0.23.0/vllm/model_executor/models/llama.py#L512"' in n


def test_no_remote_scripts_or_styles_and_local_links_resolve(out):
    css = read(out / "static/site.css")
    js = read(out / "static/site.js")
    assert "http" not in css and "@import" not in css
    assert not re.search(r"https?://", js)
    for page in out.rglob("*.html"):
        refs = refs_of(page)
        ids = set(refs.ids)
        for tag, _attr, value in refs.refs:
            if tag in ("script", "link", "img", "iframe", "source", "object", "embed", "form"):
                assert not re.match(r"^(https?:)?//", value), (page, tag, value)
            if re.match(r"^[a-z]+:", value) or value.startswith("//"):
                assert value.startswith(("https://github.com/vllm-project/vllm/blob/",
                                         f"{RECIPES_BLOB}/models/")), (page, value)
                continue
            path, _, frag = value.partition("#")
            if path:
                assert not path.startswith("/"), (page, value)  # relative: works from file://
                assert (page.parent / path).resolve().is_file(), (page, value)
            elif frag and "=" not in frag:
                assert frag in ids, (page, value)


def test_no_machine_paths(out, built):
    db = built[0]
    for f in out.rglob("*"):
        if f.suffix in (".html", ".json", ".yaml", ".js", ".css"):
            text = read(f)
            assert str(db.parent) not in text and "/tmp/" not in text and "/work/" not in text, f


def test_recipes_url_is_where_cause_lines_link(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    base = "https://github.com/vllm-project/recipes/blob/8959cf6"
    build_site(db, tmp_path / "out", recipes_url=base + "/")
    assert f'href="{base}/models/zai-org/GLM-5.2.yaml#L60"' in read(tmp_path / "out" / GLM_PAGE)


def test_cli_prints_the_sizes(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    r = cli_kit.run("site", "--db", str(db), "-o", str(tmp_path / "out"), "--recipes-url", "https://example.org/r")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^9 pages \+ verdicts\.json [\d.]+ MB \(largest page \d+ kB, [\w/.-]+\), "
                     r"compat\.db\.gz [\d.]+ MB; [\d.]+ MB written in [\d.]+s -> ", r.stdout)
    assert 'href="https://example.org/r/models/' in read(tmp_path / "out" / GLM_PAGE)


# ---------------------------------------------------------------------------- exports


def test_verdicts_json_holds_every_row(out, built):
    doc = json.loads(read(out / "verdicts.json"))
    jsonschema.validate(doc, json.loads(read(schema_dir() / "site_verdicts.schema.json")))
    assert doc["format"] == FORMAT and doc["releases"] == fixture_db.RELEASES
    expected = set()
    for r in fixture_db.rows():
        targets = ([(r["platform"], p) for p in r["profiles"].split(",")]
                   if not r["hardware"] and r["profiles"] else [(r["platform"], r["hardware"])])
        for platform, hardware in targets:
            expected.add((r["recipe"], r["vllm_version"], r["variant"], r["model_id"],
                          r["strategy"], r["feature"], r["mode"], platform, hardware, r["status"],
                          r["message"], r["reason"], r["evidence"], r["works_from"], r["gated"],
                          r["pinned"], r["cause"]))
    got = rows_of_document(doc)
    keys = ("recipe", "vllm_version", "variant", "model_id", "strategy", "feature", "mode",
            "platform", "hardware", "status", "message", "reason", "evidence", "works_from",
            "gated", "pinned", "cause")
    assert len(got) == len(expected)
    assert {tuple(g[k] for k in keys) for g in got} == expected
    glm = [g for g in got if g["recipe"] == "models/zai-org/GLM-5.2.yaml" and g["mode"] == "mtp"
           and g["strategy"] == "multi_node_tp_pp" and g["vllm_version"] == "0.23.0"]
    assert glm and all(g["status"] == "blocked" and g["works_from"] == "0.30.0" and g["pinned"] == 1
                       for g in glm)
    cause = doc["causes"][glm[0]["causes"][0]]
    assert cause == {"kind": "feature", "label": "spec_decoding:mtp",
                     "field": "features.spec_decoding.modes.mtp", "line": 60,
                     "fix_kind": "pin_bump", "fix": "min_vllm_version 0.23.0 -> 0.30.0",
                     "fix_why": "", "works_from": "0.30.0"}


def test_verdicts_json_keeps_rows_that_differ_only_in_source(tmp_path):
    """The recipes site's api and ui can emit different commands for one combination: two rows
    with the same outcome, both in verdicts.json (format @2 merged them)."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(verdict)") if r[1] not in ("id", "source")]
    con.execute(f"INSERT INTO verdict ({', '.join(cols)}, source) SELECT {', '.join(cols)}, 'api' "
                "FROM verdict WHERE recipe LIKE '%GLM-5.2%' AND mode = 'mtp' "
                "AND strategy = 'multi_node_tp_pp' AND vllm_version = '0.23.0' AND variant = 'default'")
    added = con.execute("SELECT changes()").fetchone()[0]
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    doc = json.loads(read(tmp_path / "out/verdicts.json"))
    jsonschema.validate(doc, json.loads(read(schema_dir() / "site_verdicts.schema.json")))
    got = rows_of_document(doc)
    assert added and sum(g["source"] == "api" for g in got) == added
    assert len(got) == len({(g["recipe"], g["vllm_version"], g["variant"], g["strategy"],
                             g["feature"], g["mode"], g["platform"], g["hardware"], g["source"])
                            for g in got})


def test_database_is_shipped_gzipped_and_whole(out, built, tmp_path):
    copy = tmp_path / "compat.db"
    copy.write_bytes(gzip.decompress((out / "compat.db.gz").read_bytes()))

    def dump(path: Path) -> list[str]:
        con = sqlite3.connect(path)
        try:
            return list(con.iterdump())
        finally:
            con.close()

    assert dump(copy) == dump(built[0])  # every table, view and row of the build's database
    con = sqlite3.connect(copy)
    n = con.execute("SELECT count(*) FROM v_verdict").fetchone()[0]
    causes = con.execute("SELECT count(*) FROM v_cause").fetchone()[0]
    con.close()
    assert n == len(fixture_db.rows()) and causes > 0


def test_gzip_is_reproducible(tmp_path, built):
    build_site(built[0], tmp_path / "a")
    build_site(built[0], tmp_path / "b")
    assert (tmp_path / "a/compat.db.gz").read_bytes() == (tmp_path / "b/compat.db.gz").read_bytes()
    assert read(tmp_path / "a/verdicts.json") == read(tmp_path / "b/verdicts.json")


def test_datasette_metadata(out, tmp_path):
    meta = yaml.safe_load(read(out / "metadata.yaml"))
    assert meta["title"] and meta["description"]
    tables = meta["databases"]["compat"]["tables"]
    copy = tmp_path / "compat.db"
    copy.write_bytes(gzip.decompress((out / "compat.db.gz").read_bytes()))
    con = sqlite3.connect(copy)
    names = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table','view') "
        "AND name NOT LIKE 'sqlite_%'")]
    con.close()
    for name in names:
        assert tables[name]["description"], name
    assert list(tables["v_verdict"]["columns"]) == V_VERDICT + V_VERDICT_APPENDED + ["source"]
    assert all(tables["v_verdict"]["columns"].values())
    assert list(tables["v_finding"]["columns"]) == V_VERDICT + ["gated", "pinned", "works_from",
                                                                 "judged", "source"]
    assert all(tables["v_finding"]["columns"].values())
    assert list(tables["v_arch_capability"]["columns"]) == V_ARCH
    assert all(tables["v_arch_capability"]["columns"].values())


# ---------------------------------------------------------------------------- budget


def _scaled(tmp_path: Path, copies: int) -> Path:
    """The fixture's six recipes copied under new names: 6 x `copies` recipes, with causes."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    vcols = [r[1] for r in con.execute("PRAGMA table_info(verdict)") if r[1] != "id"]
    ccols = [r[1] for r in con.execute("PRAGMA table_info(cause)") if r[1] != "id"]
    base = con.execute(f"SELECT id, {', '.join(vcols)} FROM verdict").fetchall()
    causes = con.execute(f"SELECT id, {', '.join(ccols)} FROM cause").fetchall()
    links = con.execute("SELECT verdict_id, cause_id FROM verdict_cause").fetchall()
    next_v = max(r[0] for r in base) + 1
    next_c = max(c[0] for c in causes) + 1
    ri, cri, ci = vcols.index("recipe"), ccols.index("recipe"), vcols.index("cause_id")
    def rename(path: str, i: int) -> str:
        return path.replace("models/", f"models/org{i % 40}-", 1).replace(".yaml", f"-{i}.yaml")

    for i in range(1, copies):
        cause_map = {}
        for c in causes:
            cause_map[c[0]] = next_c
            values = list(c[1:])
            values[cri] = rename(values[cri], i)
            con.execute(f"INSERT INTO cause (id, {', '.join(ccols)}) VALUES "
                        f"({', '.join('?' * (len(ccols) + 1))})", (next_c, *values))
            next_c += 1
        verdict_map = {}
        for r in base:
            values = list(r[1:])
            values[ri] = rename(values[ri], i)
            if values[ci] is not None:
                values[ci] = cause_map[values[ci]]
            verdict_map[r[0]] = next_v
            con.execute(f"INSERT INTO verdict (id, {', '.join(vcols)}) VALUES "
                        f"({', '.join('?' * (len(vcols) + 1))})", (next_v, *values))
            next_v += 1
        con.executemany("INSERT INTO verdict_cause (verdict_id, cause_id) VALUES (?, ?)",
                        [(verdict_map[v], cause_map[c]) for v, c in links])
    con.commit()
    con.close()
    return db


def test_budget_on_a_fixture_the_size_of_the_snapshot(tmp_path):
    """174 recipes at two releases (the snapshot has 173): the pages and JSON stay in budget."""
    db = _scaled(tmp_path, 29)
    report = build_site(db, tmp_path / "out")
    assert report.pages == 3 + 6 * 29
    index = index_entries(read(tmp_path / "out/index.html"))
    assert 12 * 174 <= len(index)  # as many entries as the snapshot's index has (2,109)
    assert report.pages_and_json_bytes <= BUDGET_PAGES_AND_JSON, report
    assert report.largest_page_bytes <= BUDGET_PAGE, report
    assert report.database_bytes < db.stat().st_size / 5
    assert report.seconds < 20


# ---------------------------------------------------------------------------- naming


def test_cell_ids_and_refs():
    assert cell_id("zai-org-glm-5.2", "multi_node_tp_pp", "spec_decoding", "mtp") == GLM_CELL
    assert cell_id("x", "single_node_tp", "", "") == "cell-x-single_node_tp-base"
    assert cell_id("x", "single_node_tp", "tool_calling", "") == \
        "cell-x-single_node_tp-tool_calling"
    assert cell_id("x", "", "", "") == "cell-x-none-base"
    assert git_ref("0.23.0") == "v0.23.0" and git_ref("0.10.1rc1") == "v0.10.1rc1"
    assert git_ref("main", "abc123") == "abc123" and git_ref("main") is None
    links = evidence_links("vllm/config/model.py:1200; somewhere in the docs", "v0.23.0")
    assert links[0].url == MODEL_PY and links[1].url is None
    assert [link.url for link in evidence_links("vllm/x.py:3", None)] == [None]
    assert site_mod.index_page("pinned") == "index.html"
    assert site_mod.index_page("0.23.0") == "index-0.23.0.html"
    assert site_mod.index_page("my tree") == "index-my_tree.html"


def test_labels_break_only_where_they_should():
    assert site_mod.breakable("spec_decoding:mtp") == "spec_decoding:<wbr>mtp"
    assert site_mod.breakable("multi_node_tp_pp") == "multi_node_<wbr>tp_pp"
    assert site_mod.breakable("decode_context_parallelism") == \
        "decode_<wbr>context_<wbr>parallelism"
    assert site_mod.breakable("a<b") == "a&lt;b"


def test_version_order():
    versions = ["0.33.0", "0.9.2", "nightly", "0.23.0", "0.23.0rc1", "0.10.1.1"]
    assert sorted(versions, key=release_key) == [
        "0.9.2", "0.10.1.1", "0.23.0rc1", "0.23.0", "0.33.0", "nightly"]


# ---------------------------------------------------------------------------- robustness


def _db_with(tmp_path: Path, **changes) -> Path:
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    for col, value in changes.items():
        con.execute(f"UPDATE verdict SET {col} = ? "
                    "WHERE recipe LIKE '%GLM-5.2%' AND status = 'blocked'", (value,))
    con.commit()
    con.close()
    return db


def test_text_is_escaped(tmp_path):
    db = _db_with(tmp_path, message="<script>alert('x')</script>", reason="a & b <i>")
    con = sqlite3.connect(db)
    con.execute("UPDATE cause SET label = '<b>x</b>', fix_why = '<i>why</i>' "
                "WHERE recipe LIKE '%GLM-5.2%'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    for page in ("out/" + GLM_PAGE, "out/index.html"):
        html = read(tmp_path / page)
        assert "<script>alert" not in html and "<b>x</b>" not in html and "<i>why" not in html
        assert "&lt;b&gt;x&lt;/b&gt;" in html
    html = read(tmp_path / "out" / GLM_PAGE)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "a &amp; b &lt;i&gt;" in html


def test_rebuild_replaces_the_site_whole(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    out = tmp_path / "out"
    build_site(db, out)
    (out / "stale.html").write_text("old", encoding="utf-8")
    build_site(db, out)
    assert not (out / "stale.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.db", "out"]  # no temp dirs left


def test_failed_build_leaves_the_previous_site(tmp_path, monkeypatch):
    db = fixture_db.build(tmp_path / "in.db")
    out = tmp_path / "out"
    build_site(db, out)
    before = read(out / "index.html")

    def boom(*_a, **_k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(site_mod, "_recipe_model", boom)
    with pytest.raises(RuntimeError):
        build_site(db, out)
    assert read(out / "index.html") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.db", "out"]


def test_failed_gzip_fails_the_build(tmp_path, monkeypatch):
    db = fixture_db.build(tmp_path / "in.db")

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(site_mod, "ship_database", boom)
    with pytest.raises(OSError, match="disk full"):
        build_site(db, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.db"]


def test_refuses_to_replace_a_foreign_directory(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(UserError, match="not built by `compat site`"):
        build_site(db, foreign)
    assert (foreign / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_bad_inputs_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such database"):
        build_site(tmp_path / "missing.db", tmp_path / "out")
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite at all, just text" * 10, encoding="utf-8")
    with pytest.raises(UserError, match="not a vllm-compat database"):
        build_site(junk, tmp_path / "out")
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(UserError, match="no `verdict` table"):
        build_site(empty, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_empty_database_builds_an_empty_matrix(tmp_path):
    from compat import store

    db = tmp_path / "empty.db"
    with store.writing(db):
        pass
    report = build_site(db, tmp_path / "out")
    assert report.pages == 1
    assert "no verdicts yet" in read(tmp_path / "out/index.html")
    assert json.loads(read(tmp_path / "out/verdicts.json"))["recipes"] == {}


def test_database_without_cause_tables_still_renders(tmp_path):
    """A database written before the cause stage: no causes, no profiles, every row judged."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    for name in ("v_cause", "v_verdict", "v_finding"):
        con.execute(f"DROP VIEW {name}")
    con.execute("DROP TABLE verdict_cause")
    con.execute("DROP TABLE cause")
    for col in ("cause_id", "profiles", "judged", "cause", "cause_kind"):
        con.execute(f"ALTER TABLE verdict DROP COLUMN {col}")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out" / GLM_PAGE)
    assert "works from 0.30.0" in html and '<p class="cause">' not in html


def test_unpinned_recipe_defaults_to_newest_release(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET pinned = 0 WHERE recipe LIKE '%GLM-4.5-Air%'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out/recipes/zai-org/GLM-4.5-Air.html")
    assert 'data-default="0.33.0"' in html
    assert "vLLM 0.33.0 · pin not scanned, newest shown" in index_row(
        read(tmp_path / "out/index.html"), "GLM-4.5-Air")


def test_a_variant_pinned_elsewhere_is_not_dropped_from_the_index(tmp_path):
    """One variant pins a scanned release, the others do not: the index shows all of them."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET pinned = 0 "
                "WHERE recipe LIKE '%GLM-5.2%' AND variant <> 'nvfp4'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out/index.html")
    row = index_row(html, "GLM-5.2")
    assert "vLLM 0.23.0 · pinned; 0.33.0 · pin not scanned, newest shown for the rest" in row
    entries = index_entries(html)
    # dspark is offered to variant default only: it is still listed, at 0.33.0
    dspark = entries["cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-dspark"]
    assert dspark["status"] == "blocked"
    assert entries["cell-zai-org-glm-5.2-single_node_tp-spec_decoding-dspark"]["status"] == "ok"


def test_combinations_pinned_at_several_releases_show_the_lowest(tmp_path):
    """A build with explicit --vllm may mark every judged release pinned: no mixing of releases."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET pinned = 1 WHERE recipe LIKE '%GLM-5.2%'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    index = read(tmp_path / "out/index.html")
    assert "<small>vLLM 0.23.0 · pinned</small>" in index_row(index, "GLM-5.2")
    assert index_entries(index)[GLM_CELL]["status"] == "blocked"
    assert 'data-default="0.23.0"' in read(tmp_path / "out" / GLM_PAGE)


def test_a_release_judged_only_for_blocked_combinations_says_so(tmp_path):
    """Pinned builds judge later releases only where the pin is blocked: no false '—' there."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    ids = [r[0] for r in con.execute(
        "SELECT later.id FROM verdict later JOIN verdict pin ON pin.recipe = later.recipe "
        "AND pin.variant = later.variant AND pin.strategy = later.strategy "
        "AND pin.feature = later.feature AND pin.mode = later.mode "
        "AND pin.platform = later.platform AND pin.hardware = later.hardware "
        "WHERE later.recipe LIKE '%GLM-5.2%' AND later.vllm_version = '0.33.0' "
        "AND pin.vllm_version = '0.23.0' AND pin.status <> 'blocked'")]
    con.execute(f"DELETE FROM verdict WHERE id IN ({', '.join(map(str, ids))})")
    con.execute("UPDATE verdict SET judged = 0 WHERE recipe LIKE '%GLM-5.2%' "
                "AND vllm_version = '0.33.0'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out" / GLM_PAGE)
    later = html[html.index('id="release=0.33.0"'):]
    assert '<span class="tag partial">judged where the pin is blocked</span>' in later
    assert "judged where the pin is blocked" not in html[html.index('id="release=0.23.0"'):
                                                         html.index('id="release=0.33.0"')]
    said = ("was judged again only for the combinations blocked at the pinned release (0.23.0), "
            "to find where they start: each cell shown was blocked there")
    assert said in re.search(r'<p class="lede">.*?</p>', html, re.S).group(0)
    # the section says what its cells were at the pin: a cell does not repeat it
    cell = the_cell(html, "0.33.0", "default", "multi_node_tp_pp", "spec_decoding-mtp")
    assert cell["class"] == "p s-ok" and "was" not in cell["text"]
    assert "GLM-5.2" not in read(tmp_path / "out/index-0.33.0.html")  # not judged there


def test_long_note_lists_are_capped(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET argv = json_array(json_array('', "
                "json_array('vllm', 'serve', id))) "
                "WHERE recipe LIKE '%GLM-5.2%' AND status = 'blocked'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out" / GLM_PAGE)
    cell = the_cell(html, "0.23.0", "default", "multi_node_tp_pp", "spec_decoding-mtp")
    [n] = notes_of_cell(html, cell)
    assert n.count("<pre>vllm serve ") == 1  # the first; every command is in compat.db.gz
    assert re.search(r"<summary>Command \(1 of \d+\)</summary>", n)
    assert "every command is in compat.db.gz" in html


def test_commands_come_from_the_command_table(tmp_path):
    """argv stored once in `command` (as the build writes it) is what a note shows."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("INSERT INTO command (id, argv) VALUES (7, ?)",
                (json.dumps([["prefill", ["vllm", "serve", "from-the-table"]]]),))
    con.execute("UPDATE verdict SET argv = '', command_id = 7 WHERE recipe LIKE '%GLM-5.2%'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    assert "<pre># prefill\nvllm serve from-the-table</pre>" in read(tmp_path / "out" / GLM_PAGE)


def test_commands_render_roles_and_quoting():
    raw = json.dumps([["prefill", ["vllm", "serve", "m", "--kv-transfer-config", '{"a":1}']],
                      ["decode", ["vllm", "serve", "m"]]])
    assert site_mod._command(raw) == (
        "# prefill\nvllm serve m --kv-transfer-config '{\"a\":1}'\n# decode\nvllm serve m")
    assert site_mod._command(json.dumps([["", ["vllm", "serve", "m"]]])) == "vllm serve m"
    assert site_mod._command(json.dumps(["vllm", "serve", "a b"])) == "vllm serve 'a b'"


def test_rows_without_a_strategy_get_their_own_column(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET strategy = '' WHERE recipe LIKE '%GLM-4.5-Air%' "
                "AND strategy = 'single_node_tp'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    index = read(tmp_path / "out/index.html")
    assert '<option value="none">no strategy</option>' in index
    assert '<th scope="col" data-strategy="none" data-slug="none">no strategy</th>' in index
    assert "cell-zai-org-glm-4.5-air-none-base" in index_entries(index)
    page = read(tmp_path / "out/recipes/zai-org/GLM-4.5-Air.html")
    assert '<th data-st="none">no strategy</th>' in page
    assert "cell-zai-org-glm-4.5-air-none-base" in pages.pinned_cell_ids(page)


def test_targets_are_grouped_by_platform():
    pairs = [("cuda", "h100"), ("cuda", "b200"), ("rocm", ""), ("cuda", "b200")]
    assert site_mod.targets_text(pairs) == "cuda: b200, h100; rocm"
    assert site_mod.targets_text([("cuda", ""), ("cuda", "h100")]) == "cuda: any profile, h100"


# ---------------------------------------------------------------------------- the real build


def _build_and_site(tmp: Path, snapshot: Path, *vllm: str) -> tuple[Path, Path, float, str]:
    """`compat build` (at `vllm`, else each recipe at its pin) and `compat site`, as whole
    processes: the database, the site, the seconds `compat site` took and what it printed."""
    import time

    db = tmp / "compat.db"
    releases = [arg for v in vllm for arg in ("--vllm", v)]
    r = subprocess.run([sys.executable, "-m", "compat.cli", "build", "--recipes", str(snapshot),
                        *releases, "--db", str(db)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "compat.cli", "site", "--db", str(db), "-o",
                        str(tmp / "site")], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    assert r.returncode == 0, r.stderr
    return db, tmp / "site", seconds, r.stdout.strip()


@pytest.fixture(scope="module")
def two_release_site(tmp_path_factory, snapshot, vllm_tree):
    vllm_tree("0.23.0"), vllm_tree("0.33.0")  # download once, shared cache
    return _build_and_site(tmp_path_factory.mktemp("two"), snapshot, "0.23.0", "0.33.0")


@pytest.fixture(scope="module")
def pinned_site(tmp_path_factory, snapshot):
    """Each recipe judged at the release it pins (about 34 releases), and the releases after a
    blocked pin where it is blocked: the main job's site."""
    return _build_and_site(tmp_path_factory.mktemp("pinned"), snapshot)


def _within_budget(db: Path, out: Path, seconds: float, printed: str) -> dict[str, int]:
    """The budget as the issue states it, on the bytes as written; the page sizes."""
    sizes = {p.relative_to(out).as_posix(): p.stat().st_size for p in out.rglob("*")
             if p.suffix in (".html", ".json")}
    largest = max((n, p) for p, n in sizes.items() if p.endswith(".html"))
    print(f"\nsite: {printed}; whole process {seconds:.1f}s; largest page {largest}")
    assert sum(sizes.values()) <= BUDGET_PAGES_AND_JSON, sum(sizes.values())
    assert largest[0] <= BUDGET_PAGE, largest
    assert (out / "compat.db.gz").stat().st_size < db.stat().st_size / 5
    # every recipe pins a release (min_vllm_version): none reads as unpinned
    index = read(out / "index.html")
    assert "no pin" not in index
    assert index.count("· pinned") + index.count("· pin not scanned") >= 173
    return sizes


@pytest.mark.slow
def test_budget_on_the_snapshot_at_two_releases(two_release_site):
    """The issue's budget, measured on the real thing: whole processes, bytes as written."""
    db, out, seconds, printed = two_release_site
    sizes = _within_budget(db, out, seconds, printed)
    assert {p for p in sizes if p.startswith("index")} == {
        "index.html", "index-0.23.0.html", "index-0.33.0.html"}
    assert seconds < 30
    _no_blocked_cell_hidden_by_width(out)
    _recipe_pages_show_what_they_cite(out, sizes)


@pytest.mark.slow
def test_budget_on_the_snapshot_at_each_recipes_pin(pinned_site):
    """The main job's site (issue 18): every recipe at its pin, and the releases judged after a
    blocked pin, within the same budget."""
    db, out, seconds, printed = pinned_site
    sizes = _within_budget(db, out, seconds, printed)
    # a release selector over every release judged: pages, or index.html narrowed to the
    # recipes pinned at the release
    nav = re.search(r'<nav class="releases".*?</nav>', read(out / "index.html"), re.S).group(0)
    hrefs = re.findall(r'<a href="([^"]+)" data-view=', nav)
    assert len(hrefs) > 20 and all((out / h.partition("#")[0]).is_file() for h in hrefs)
    assert sum("data-narrows" in a for a in re.findall(r"<a [^>]*>", nav)) > 20
    doc = json.loads(read(out / "verdicts.json"))
    con = sqlite3.connect(db)
    rows = con.execute("SELECT sum(CASE WHEN hardware = '' AND profiles <> '' THEN "
                       "length(profiles) - length(replace(profiles, ',', '')) + 1 ELSE 1 END) "
                       "FROM verdict").fetchone()[0]
    con.close()
    assert len(rows_of_document(doc)) == rows  # every verdict row, once per hardware profile
    assert seconds < 60
    _no_blocked_cell_hidden_by_width(out)
    _recipe_pages_show_what_they_cite(out, sizes)


def _no_blocked_cell_hidden_by_width(out: Path) -> None:
    """In Chromium at 1400x1000 (when installed): each view of the release selector (a page, or
    index.html narrowed) shows every blocked entry or counts it in the off-screen cue, and names
    the blocked count of each row in its first column."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return
    chromium = Path("/usr/bin/chromium")
    if not chromium.is_file():
        return
    nav = re.search(r'<nav class="releases".*?</nav>', read(out / "index.html"), re.S).group(0)
    views = re.findall(r'<a href="([^"]+)" data-view=', nav)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        blocked_rows = 0
        for view in views:
            path, _, fragment = view.partition("#")
            page.goto("about:blank")
            page.goto((out / path).as_uri() + (f"#{fragment}" if fragment else ""))
            page.wait_for_selector("html[data-ready='1']")
            places = page.evaluate(pages.BLOCKED_PLACES)
            hidden = len(places["right"])
            assert pages.cue(page, "right") == (f"{hidden} blocked off-screen →" if hidden else "")
            print(f"{view}: {len(places['shown'])} blocked entries in view, {hidden} off-screen")
            rows = page.eval_on_selector_all(
                "tr.r", "trs => trs.filter(tr => !tr.hidden && tr.querySelector('li.e.s-blocked'))"
                        ".map(tr => tr.querySelector('th.rh details.why summary').textContent)")
            assert all("blocked" in summary for summary in rows), view
            blocked_rows += len(rows)
        browser.close()
        assert blocked_rows and errors == []


def _recipe_pages_show_what_they_cite(out: Path, sizes: dict[str, int]) -> None:
    """In Chromium (when installed): the three largest recipe pages load without errors, show
    every text their notes cite in place, and each release's notes are those its cells cite."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return
    chromium = Path("/usr/bin/chromium")
    if not chromium.is_file():
        return
    largest = sorted((p for p in sizes if p.startswith("recipes/")), key=sizes.__getitem__)[-3:]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for name in largest:
            page.goto((out / name).as_uri())
            page.wait_for_selector("html[data-ready='1']")
            assert page.eval_on_selector_all("#notes a[href^='#']", "as => as.length") == 0, name
            for release in page.eval_on_selector_all(
                    "nav.releases a", "as => as.map(a => a.dataset.release)"):
                page.evaluate(f"location.hash = 'release={release}'")
                page.wait_for_function(
                    f"document.getElementById('notes-h') === null || "
                    f"document.getElementById('notes-h').textContent.endsWith(' {release}')")
                cited = page.evaluate(
                    "() => [...new Set([...document.querySelectorAll('section.rel:not([hidden]) "
                    "a[href^=\"#note-\"]')].map(a => a.getAttribute('href').slice(1)))].sort()")
                shown = page.eval_on_selector_all(
                    "#notes li.note:not([hidden])", "ns => ns.map(n => n.id).sort()")
                assert cited == shown, (name, release)
        browser.close()
        assert errors == []


def test_follower_node_repeats_are_said_once():
    chain = json.dumps(["[blocked] --tool-call-parser x is not registered",
                        "[blocked] worker 1: --tool-call-parser x is not registered",
                        "[blocked] worker 1: --headless needs --nnodes",
                        "[blocked] prefill: gate g",
                        "[blocked] prefill worker 2: gate g",
                        "[blocked] decode worker 1: gate g",
                        "[unknown] worker 3: --tool-call-parser x is not registered"])
    assert site_mod._chain(chain) == ["[blocked] --tool-call-parser x is not registered",
                                      "[blocked] worker 1: --headless needs --nnodes",
                                      "[blocked] prefill: gate g",
                                      "[blocked] decode worker 1: gate g",  # decode's lead does not say it
                                      "[unknown] worker 3: --tool-call-parser x is not registered"]


def test_follower_commands_are_counted_not_shown():
    argvs = [["", ["vllm", "serve", "m", "--node-rank", "0"]],
             ["worker 1", ["vllm", "serve", "m", "--node-rank", "1", "--headless"]],
             ["prefill", ["vllm", "serve", "m", "--port", "8001"]],
             ["prefill worker 1", ["vllm", "serve", "m", "--port", "8001", "--headless"]]]
    text = site_mod._command(json.dumps(argvs))
    assert text.splitlines() == ["vllm serve m --node-rank 0", "# prefill", "vllm serve m --port 8001",
                                 "# and 2 follower node command(s) (--node-rank > 0): in compat.db.gz"]
    assert "--headless" not in text
