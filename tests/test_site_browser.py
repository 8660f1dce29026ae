"""The generated site in headless Chromium, opened from file://: filters, permalinks, releases.

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
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "site" / "fixture_db.py"
GLM_CELL = "cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-mtp"
GLM_SEL = f"[id='{GLM_CELL}']"  # the id has a dot, so no #id selector


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from compat.emit.site import build_site

    spec = importlib.util.spec_from_file_location("site_fixture_db", FIXTURE)
    assert spec and spec.loader
    fixture_db = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture_db)
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


@pytest.fixture()
def page(browser):
    """A page that records errors and every URL it requests (all must be file://)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = ctx.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.requests = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("console", lambda m: m.type == "error" and pg.errors.append(m.text))
    pg.on("request", lambda r: pg.requests.append(r.url))
    yield pg
    assert pg.errors == []
    assert all(u.startswith("file://") for u in pg.requests), pg.requests
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


def test_matrix_renders(page, site):
    open_page(page, site, "index.html")
    statuses = visible_statuses(page)
    assert len(statuses) == page.locator("#matrix li.e").count() > 40
    assert set(statuses) == {"ok", "blocked", "warning", "unknown"}
    assert page.locator("#shown").inner_text().startswith(f"{len(statuses)} of {len(statuses)} ")
    assert page.locator(".legend").inner_text().count("blocked") >= 1


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
    assert labels and all(k.startswith("spec_decoding:") for k in labels)
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


def test_recipe_page_shows_the_reason_of_the_blocked_cell(page, site):
    open_page(page, site, f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}")
    cells = page.locator(f"section.rel[data-release='0.23.0'] td[data-cell='{GLM_CELL}']")
    assert cells.count() == 3
    assert "hl" in cells.first.get_attribute("class").split()
    assert in_viewport(page, GLM_SEL)
    assert "blocked" in cells.first.inner_text()
    note = page.locator(".note.hl")
    assert note.count() == 1 and note.is_visible()
    text = note.inner_text()
    assert "does not implement SupportsPP" in text
    assert "Pipeline parallelism is not supported for this model." in text
    assert "works from 0.33.0" in text
    assert note.locator("a", has_text="vllm/config/model.py:1200").get_attribute("href") == \
        "https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/config/model.py#L1200"
    assert page.locator("section.rel[data-release='0.33.0']").is_hidden()


def test_release_selector(page, site):
    open_page(page, site, "recipes/zai-org/GLM-5.2.html")
    assert page.locator("section.rel[data-release='0.23.0']").is_visible()
    assert page.locator("section.rel[data-release='0.33.0']").is_hidden()
    assert page.locator("nav.releases a[aria-current]").get_attribute("data-release") == "0.23.0"
    page.click("nav.releases a[data-release='0.33.0']")
    later = page.locator("section.rel[data-release='0.33.0']")
    later.wait_for(state="visible")
    assert page.locator("section.rel[data-release='0.23.0']").is_hidden()
    cell = later.locator(f"td[data-cell='{GLM_CELL}']").first
    assert "ok" in cell.inner_text() and "was blocked at 0.23.0" in cell.inner_text()
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


def test_screenshots(page, site):
    target = os.environ.get("COMPAT_SITE_SCREENSHOTS")
    if not target:
        pytest.skip("set COMPAT_SITE_SCREENSHOTS=DIR to save screenshots")
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_page(page, site, "index.html")
    page.screenshot(path=str(out / "site-index.png"), full_page=True)
    open_page(page, site, f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}")
    page.screenshot(path=str(out / "site-recipe.png"), full_page=True)
