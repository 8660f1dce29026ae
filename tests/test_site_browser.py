"""The generated site in headless Chromium, opened from file://: filters, permalinks, releases,
the links site.js adds, and blocked cells a window's width must not hide.

Needs the `playwright` Python package and a system Chromium at /usr/bin/chromium (no
`playwright install`): apt-get install -y chromium && pip install playwright.
Set COMPAT_SITE_SCREENSHOTS=DIR to also save screenshots of the index and a recipe page.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "site" / "fixture_db.py"
GLM_CELL = "cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-mtp"
GLM_SEL = f"[id='{GLM_CELL}']"  # the id has a dot, so no #id selector
KIMI_ROW = "tr.r[data-slug='moonshotai-kimi-k2.5']"
WIDE = {"width": 1400, "height": 1000}  # the window the issue names


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PAGES = _module("site_pages", FIXTURE.with_name("pages.py"))
BLOCKED_PLACES = PAGES.BLOCKED_PLACES


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from compat.emit.site import build_site

    fixture_db = _module("site_fixture_db", FIXTURE)
    tmp = tmp_path_factory.mktemp("site-browser")
    db = fixture_db.build(tmp / "compat.db")
    build_site(db, tmp / "out")
    return tmp / "out"


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed "
                    "(pip install playwright; no browser download needed)")
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def _watched(ctx):
    """A page that records errors and every URL it requests (all must be file://)."""
    pg = ctx.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.requests = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("console", lambda m: m.type == "error" and pg.errors.append(m.text))
    pg.on("request", lambda r: pg.requests.append(r.url))
    return pg


def _checked(pg) -> None:
    assert pg.errors == []
    assert all(u.startswith("file://") for u in pg.requests), pg.requests


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = _watched(ctx)
    yield pg
    _checked(pg)
    ctx.close()


@pytest.fixture()
def wide(browser):
    ctx = browser.new_context(viewport=WIDE)
    pg = _watched(ctx)
    yield pg
    _checked(pg)
    ctx.close()


def open_page(pg, site: Path, rel: str):
    path, sep, fragment = rel.partition("#")
    pg.goto((site / path).as_uri() + sep + fragment)
    pg.wait_for_selector("html[data-ready='1']")
    return pg


def visible_statuses(pg) -> list[str]:
    return pg.eval_on_selector_all(
        "#matrix li.e", "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.s)")


def in_viewport(pg, selector: str) -> bool:
    return pg.eval_on_selector(selector, """el => {
        const r = el.getBoundingClientRect();
        return r.bottom > 0 && r.right > 0 && r.top < innerHeight && r.left < innerWidth;
    }""")




def cue(pg, side: str) -> str:
    return PAGES.cue(pg, side)


def test_matrix_renders(page, site):
    open_page(page, site, "index.html")
    statuses = visible_statuses(page)
    assert len(statuses) == page.locator("#matrix li.e").count() > 40
    assert set(statuses) == {"ok", "blocked", "warning", "unknown"}
    assert page.locator("#shown").inner_text().startswith(f"{len(statuses)} of {len(statuses)} ")
    assert page.locator(".legend").inner_text().count("blocked") >= 1
    # the symbol comes from CSS, the status word is its text alternative
    symbol = page.eval_on_selector(f"{GLM_SEL}", "el => getComputedStyle(el, '::before').content")
    assert symbol.startswith('"✗"')


def test_entries_link_to_their_recipe_cell(page, site):
    """site.js gives each entry the id compat.emit.site.cell_id gives its cell, and a link there."""
    expected = PAGES.index_entries((site / "index.html").read_text(encoding="utf-8"))
    open_page(page, site, "index.html")
    got = page.eval_on_selector_all(
        "#matrix li.e", "els => els.map(e => [e.id, e.dataset.k, e.dataset.s, "
                        "e.querySelector('a').getAttribute('href')])")
    assert {i for i, *_ in got} == set(expected)
    for cid, label, status, href in got:
        assert (label, status) == (expected[cid]["label"], expected[cid]["status"])
        path, _, frag = href.partition("#")
        assert frag == cid
        target = (site / path).read_text(encoding="utf-8")
        assert cid in PAGES.pinned_cell_ids(target), href


def test_status_filter_hides_ok_cells(page, site):
    open_page(page, site, "index.html")
    page.select_option("select[data-key=status]", "blocked")
    statuses = visible_statuses(page)
    assert statuses and set(statuses) == {"blocked"}
    assert page.locator("#matrix li.e[data-s=ok]").first.is_hidden()
    assert page.evaluate("location.hash") == "#status=blocked"
    assert page.locator(GLM_SEL).is_visible()
    # rows without a blocked entry go away; the Qwen3-Next row is all unknown
    assert page.locator("tr.r[data-q*='qwen3-next']").is_hidden()


def test_loading_a_filter_fragment_applies_it(page, site):
    open_page(page, site, "index.html#status=blocked&strategy=multi_node_tp_pp")
    assert page.locator("select[data-key=status]").input_value() == "blocked"
    assert page.locator("select[data-key=strategy]").input_value() == "multi_node_tp_pp"
    assert set(visible_statuses(page)) == {"blocked"}
    assert page.locator("th[data-strategy=single_node_tp]").is_hidden()
    assert page.locator("th[data-strategy=multi_node_tp_pp]").is_visible()
    visible_columns = page.eval_on_selector_all(
        "#matrix li.e", "els => [...new Set(els.filter(e => e.offsetParent !== null)"
                        ".map(e => e.closest('td').dataset.strategy))]")
    assert visible_columns == ["multi_node_tp_pp"]


def test_feature_and_search_filters(page, site):
    open_page(page, site, "index.html#feature=spec_decoding")
    labels = page.eval_on_selector_all(
        "#matrix li.e", "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.k)")
    assert labels and all(k.startswith("spec_decoding") for k in labels)
    page.fill("input[data-key=q]", "qwen")
    rows = page.eval_on_selector_all(
        "tr.r", "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.provider)")
    assert rows == ["Qwen"]
    assert "q=qwen" in page.evaluate("location.hash")


def test_cell_permalink_scrolls_to_and_highlights_the_cell(browser, site):
    ctx = browser.new_context(viewport={"width": 700, "height": 320})
    pg = ctx.new_page()
    open_page(pg, site, f"index.html#{GLM_CELL}")
    cell = pg.locator(GLM_SEL)
    assert "hl" in cell.get_attribute("class").split()
    assert in_viewport(pg, GLM_SEL)
    assert pg.evaluate("document.querySelectorAll('.hl').length") == 1
    ctx.close()


def test_index_release_selector_keeps_the_filters(page, site):
    open_page(page, site, "index.html#status=blocked")
    link = page.locator("nav.releases a[data-view='0.33.0']")
    assert link.get_attribute("href") == "index-0.33.0.html#status=blocked"
    link.click()
    page.wait_for_selector("html[data-ready='1']")
    assert page.url.endswith("index-0.33.0.html#status=blocked")
    assert page.locator("select[data-key=status]").input_value() == "blocked"
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-view") == "0.33.0"
    assert page.locator(GLM_SEL).is_hidden()  # ok at 0.33.0
    # a shared link naming a release opens that release's index
    open_page(page, site, "index.html#release=0.23.0&strategy=multi_node_tp_pp")
    page.wait_for_url("**/index-0.23.0.html#strategy=multi_node_tp_pp")
    page.wait_for_selector("html[data-ready='1']")
    assert page.locator("select[data-key=strategy]").input_value() == "multi_node_tp_pp"


def test_blocked_cells_are_never_hidden_by_width(wide, site):
    """At 1400x1000: every blocked entry is in view or counted by the cue, and every row with a
    blocked entry says so in the sticky first column, scrolled or not."""
    pg = open_page(wide, site, "index.html")
    places = pg.evaluate(BLOCKED_PLACES)
    right = cue(pg, "right")
    assert right == (f"{len(places['right'])} blocked off-screen →" if places["right"] else "")
    assert not places["left"] and not cue(pg, "left")
    pg.eval_on_selector(".matrix-wrap", "w => { w.scrollLeft = w.scrollWidth; }")
    pg.wait_for_timeout(50)
    places = pg.evaluate(BLOCKED_PLACES)
    left = f"← {len(places['left'])} blocked off-screen" if places["left"] else ""
    assert cue(pg, "left") == left
    assert not places["right"] and not cue(pg, "right")
    for row in pg.eval_on_selector_all("tr.r", "els => els.filter(tr => tr.querySelector("
                                               "'li.e.s-blocked')).map(tr => tr.dataset.slug)"):
        head = pg.locator(f"tr.r[data-slug='{row}'] th.rh")
        head.scroll_into_view_if_needed()
        assert "blocked" in head.locator("details.why summary").inner_text()
        assert pg.eval_on_selector(f"tr.r[data-slug='{row}'] th.rh", """th => {
            const w = document.querySelector('.matrix-wrap').getBoundingClientRect();
            const r = th.getBoundingClientRect();
            return r.left >= w.left - 1 && r.right <= w.right + 1;
        }"""), row


def test_off_screen_cue_counts_and_reveals(browser, site):
    """A window too narrow for the matrix: the cue names how many blocked entries it hides, and
    a click scrolls the nearest one into view."""
    ctx = browser.new_context(viewport={"width": 900, "height": 1000})
    pg = _watched(ctx)
    open_page(pg, site, "index.html")
    places = pg.evaluate(BLOCKED_PLACES)
    kimi = pg.eval_on_selector_all(f"{KIMI_ROW} li.e.s-blocked", "els => els.map(e => e.id)")
    assert kimi and set(kimi) <= set(places["right"])  # Kimi's are in the right-most columns
    assert cue(pg, "right") == f"{len(places['right'])} blocked off-screen →"
    pg.locator(f"{KIMI_ROW} th.rh").scroll_into_view_if_needed()
    assert "2 blocked" in pg.locator(f"{KIMI_ROW} details.why summary").inner_text()
    before = len(places["right"])
    pg.click(".offscreen.right button")
    pg.wait_for_timeout(50)
    after = pg.evaluate(BLOCKED_PLACES)
    assert len(after["right"]) < before
    assert pg.evaluate("document.activeElement.closest('li.e').id") in after["shown"]
    assert cue(pg, "left").startswith("← ")  # what scrolled out to the left is counted now
    _checked(pg)
    ctx.close()


def test_recipe_page_shows_the_reason_of_the_blocked_cell(page, site):
    open_page(page, site, f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}")
    cells = page.locator(f"section.rel[data-releases~='0.23.0'] td[data-cell='{GLM_CELL}']")
    assert cells.count() == 3
    assert "hl" in cells.first.get_attribute("class").split()
    assert in_viewport(page, GLM_SEL)
    assert cells.first.get_attribute("class").split()[:2] == ["p", "s-blocked"]
    symbol = cells.first.evaluate("td => getComputedStyle(td, '::before').content")
    assert symbol == '"✗" / "blocked "'  # the status word is the symbol's text alternative
    assert "spec_decoding:mtp fix: pin_bump · works from 0.30.0" in cells.first.inner_text()
    note = page.locator(".note.hl")
    assert note.count() == 1 and note.is_visible()
    text = note.inner_text()
    assert "does not implement SupportsPP" in text
    assert "Pipeline parallelism is not supported for this model." in text
    assert "works from 0.30.0" in text
    assert "CAUSE spec_decoding:mtp (feature) at models/zai-org/GLM-5.2.yaml:60" in text
    assert note.locator("a", has_text="vllm/config/model.py:1200").get_attribute("href") == \
        "https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/config/model.py#L1200"
    assert note.locator("a", has_text="GLM-5.2.yaml:60").get_attribute("href") == \
        "https://github.com/vllm-project/recipes/blob/main/models/zai-org/GLM-5.2.yaml#L60"
    assert page.locator("section.rel[data-releases~='0.33.0']").is_hidden()


def test_recipe_cells_get_permalinks(page, site):
    open_page(page, site, "recipes/zai-org/GLM-5.2.html")
    cell = page.locator(GLM_SEL)
    assert cell.get_attribute("data-cell") == GLM_CELL
    assert cell.locator("a.pl").get_attribute("href") == f"#{GLM_CELL}"
    later = page.locator(f"section.rel[data-releases~='0.33.0'] td[data-cell='{GLM_CELL}'] a.pl")
    assert later.first.get_attribute("href") == f"#release=0.33.0&cell={GLM_CELL}"
    unnamed = page.eval_on_selector_all(
        "table.recipe tbody td:not(.na)", "tds => tds.filter(td => !td.dataset.cell).length")
    assert unnamed == 0


def test_release_selector(page, site):
    open_page(page, site, "recipes/zai-org/GLM-5.2.html")
    assert page.locator("section.rel[data-releases~='0.23.0']").is_visible()
    assert page.locator("section.rel[data-releases~='0.33.0']").is_hidden()
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-release") == "0.23.0"
    page.click("nav.releases a[data-release='0.33.0']")
    later = page.locator("section.rel[data-releases~='0.33.0']")
    later.wait_for(state="visible")
    assert page.locator("section.rel[data-releases~='0.23.0']").is_hidden()
    cell = later.locator(f"td[data-cell='{GLM_CELL}']").first
    assert "s-ok" in cell.get_attribute("class") and "was blocked at 0.23.0" in cell.inner_text()
    # a release + cell permalink selects the release and highlights the cell there
    open_page(page, site, f"recipes/zai-org/GLM-5.2.html#release=0.33.0&cell={GLM_CELL}")
    assert later.is_visible()
    assert "hl" in later.locator(f"td[data-cell='{GLM_CELL}']").first.get_attribute("class").split()


def test_index_entry_links_to_the_recipe_cell(page, site):
    open_page(page, site, "index.html#status=blocked")
    page.click(f"{GLM_SEL} a")
    page.wait_for_selector("html[data-ready='1']")
    assert page.url.endswith(f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}")
    assert page.locator(".note.hl").is_visible()


def test_notes_show_what_they_cite_in_place(page, site):
    """Said once, shown everywhere: each [t1]/[c1]/[k1] a note cites is replaced by its text."""
    open_page(page, site, f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}")
    assert page.eval_on_selector_all("#notes a[href^='#']", "as => as.length") == 0
    note = page.locator(".note.hl")
    text = note.inner_text()
    fixture = _module("site_fixture_db", FIXTURE)
    for step in fixture.PP_CHAIN:
        assert step in text
    assert "vLLM 0.23.0 copies the target's pipeline-parallel size" in text  # the release variable
    assert note.locator("details pre").count() == 1  # its command
    assert page.locator("#said").is_visible()  # the one copy, for readers without scripts


def test_notes_follow_the_release_shown(page, site):
    """The notes are the page's: a release shows those its cells cite, their release variable
    set to it and their evidence linked at its source."""
    llama = "recipes/meta-llama/Llama-3.3-70B-Instruct.html"
    blob = "https://github.com/vllm-project/vllm/blob/"
    for release in ("0.23.0", "0.33.0"):
        open_page(page, site, f"{llama}#release={release}")
        assert page.locator("#notes-h").inner_text() == f"Notes for vLLM {release}"
        cited = page.evaluate("""() => [...new Set([...document.querySelectorAll(
            'section.rel:not([hidden]) a[href^="#note-"]')].map(a => a.getAttribute('href')
            .slice(1)))].sort()""")
        shown = page.eval_on_selector_all("#notes li.note:not([hidden])",
                                          "ns => ns.map(n => n.id).sort()")
        assert cited and cited == shown
        hrefs = page.eval_on_selector_all(
            "#notes li.note:not([hidden]) a[href*='/vllm-project/vllm/blob/']",
            "as => as.map(a => a.href)")
        assert hrefs and all(h.startswith(f"{blob}v{release}/") for h in hrefs), hrefs
        # the cells a note holds on at this release, listed in it
        cells = page.locator("#notes li.note:not([hidden]) .cells").first.inner_text()
        assert " on " in cells


def test_a_section_standing_for_several_releases(page, site):
    """Kimi-K2.5 reads the same at 0.23.0 and 0.33.0: one table for both."""
    kimi = "recipes/moonshotai/Kimi-K2.5.html"
    open_page(page, site, kimi)
    section = page.locator("section.rel[data-releases~='0.23.0']")
    assert section.is_visible() and section.get_attribute("data-releases") == "0.23.0 0.33.0"
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-release") == "0.33.0"
    page.click("nav.releases a[data-release='0.23.0']")
    page.wait_for_function("location.hash === '#release=0.23.0'")
    assert section.is_visible()
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-release") == "0.23.0"
    pl = section.locator("td[data-cell] a.pl").first.get_attribute("href")
    assert pl.startswith("#release=0.23.0&cell=cell-moonshotai-kimi-k2.5-")


def test_every_blocked_cell_shows_its_hint(page, site):
    """A section writes a note's hint at the first cell citing it; site.js shows it at all."""
    open_page(page, site, "recipes/zai-org/GLM-5.2.html")
    parts = page.eval_on_selector_all(
        "section.rel:not([hidden]) .p.s-blocked",
        "ps => ps.map(p => [...p.querySelectorAll('.cz')].map(c => c.textContent))")
    assert parts and all(hints for hints in parts)
    written = (site / "recipes/zai-org/GLM-5.2.html").read_text(encoding="utf-8")
    assert written.count('<span class="cz"') < sum(len(h) for h in parts)


def test_index_entries_sharing_a_hint_show_it(page, site):
    """An entry with the title and hint of an earlier one in its row gets them from site.js."""
    expected = PAGES.index_entries((site / "index.html").read_text(encoding="utf-8"))
    shared = [cid for cid, e in expected.items() if e["same"]]
    assert shared
    open_page(page, site, "index.html")
    for cid in shared:
        got = page.eval_on_selector(f"[id='{cid}']", """li => [li.title,
            li.querySelector('small') ? li.querySelector('small').textContent : '']""")
        assert got == [expected[cid]["title"], expected[cid]["hint"]], cid


@pytest.fixture(scope="module")
def pinned_like_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from compat.emit.site import build_site

    fixture_db = _module("site_fixture_db", FIXTURE)
    tmp = tmp_path_factory.mktemp("site-pinned-like")
    build_site(fixture_db.pinned_like(tmp / "compat.db"), tmp / "out")
    return tmp / "out"


def visible_rows(pg) -> list[str]:
    return pg.eval_on_selector_all(
        "tr.r", "trs => trs.filter(tr => !tr.hidden).map(tr => tr.dataset.release)")


def test_a_release_narrows_the_pinned_index(page, pinned_like_site):
    """Each recipe judged at its pin: a release of the selector is index.html narrowed to the
    recipes pinned there, with the filters kept both ways."""
    site = pinned_like_site
    open_page(page, site, "index.html#release=0.23.0")
    assert page.url.endswith("index.html#release=0.23.0")
    rows = visible_rows(page)
    assert rows and set(rows) == {"0.23.0"}
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-view") == "0.23.0"
    page.select_option("select[data-key=status]", "blocked")
    assert page.evaluate("location.hash") == "#status=blocked&release=0.23.0"
    assert set(visible_rows(page)) == {"0.23.0"}
    pinned = page.locator("nav.releases a[data-view='pinned']")
    assert pinned.get_attribute("href") == "index.html#status=blocked"
    later = page.locator("nav.releases a[data-view='0.33.0']")
    assert later.get_attribute("href") == "index.html#status=blocked&release=0.33.0"
    later.click()
    page.wait_for_function("location.hash === '#status=blocked&release=0.33.0'")
    assert set(visible_rows(page)) <= {"0.33.0"}
    assert page.locator("select[data-key=status]").input_value() == "blocked"
    pinned.click()
    page.wait_for_function("location.hash === '#status=blocked'")
    assert {"0.23.0", "0.33.0"} <= set(visible_rows(page))
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-view") == "pinned"


def test_screenshots(wide, site):
    target = os.environ.get("COMPAT_SITE_SCREENSHOTS")
    if not target:
        pytest.skip("set COMPAT_SITE_SCREENSHOTS=DIR to save screenshots")
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    open_page(wide, site, "index.html")
    wide.screenshot(path=str(out / "site-index.png"), full_page=True)
    open_page(wide, site, f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}")
    wide.screenshot(path=str(out / "site-recipe.png"), full_page=True)
