"""`compat site` without a browser: pages, links, legend, exports and the atomic swap."""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from compat.emit import site as site_mod
from compat.emit.site import (
    SiteReport,
    build_site,
    cell_id,
    evidence_links,
    git_ref,
    release_key,
)
from compat.errors import UserError

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "site" / "fixture_db.py"
GLM_CELL = "cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-mtp"
MODEL_PY = "https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/config/model.py#L1200"
SPEC_PY = "https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/config/speculative.py#L955"
V_VERDICT = ["vllm_version", "platform", "hardware", "recipe", "model_id", "variant", "strategy",
             "feature", "mode", "status", "message", "reason", "evidence"]
# Appended after the contract's columns (DESIGN.md: add only at the end): cause and fix.
V_VERDICT_APPENDED = ["cause_kind", "cause", "works_from", "fix_kind", "fix"]
V_ARCH = ["vllm_version", "platform", "arch", "class_path", "file", "line", "supports_pp",
          "supports_lora", "supports_multimodal", "supports_encoder_tp_data", "is_hybrid",
          "has_inner_state", "is_attention_free", "supports_transcription", "is_pooling_model",
          "is_text_generation_model", "supports_eagle3", "is_moe"]


def load_fixture():
    spec = importlib.util.spec_from_file_location("site_fixture_db", FIXTURE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fixture_db = load_fixture()


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
    assert report.pages == len(html) == 1 + len(fixture_db.RECIPES)
    assert report.bytes == sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert 0 < report.seconds < 30


def test_pages_exist_per_recipe(out):
    assert (out / "index.html").is_file()
    for recipe in fixture_db.RECIPES:
        _models, provider, name = recipe.split("/")
        assert (out / "recipes" / provider / name.replace(".yaml", ".html")).is_file()
    for f in ("compat.db", "verdicts.json", "metadata.yaml", "static/site.css", "static/site.js"):
        assert (out / f).is_file(), f


def test_legend_is_readable_without_colour(out):
    for page in (out / "index.html", out / "recipes/zai-org/GLM-5.2.html"):
        html = read(page)
        start = html.index('class="legend"')
        legend = html[start:html.index("</section>", start)]
        for symbol, word in (("✓", "ok"), ("✗", "blocked"), ("!", "warning"), ("?", "unknown")):
            shown = rf'aria-label="{word}">{re.escape(symbol)}</span> <strong>{word}</strong>'
            assert re.search(shown, legend), (page.name, word)
            assert f'title="{word}: ' in legend


def test_index_lists_counts_and_cells(out, built):
    html = read(out / "index.html")
    db = built[0]
    con = sqlite3.connect(db)
    recipes = {r[0] for r in con.execute("SELECT recipe FROM verdict")}
    con.close()
    assert html.count('class="r"') == len(recipes)
    assert re.search(r"<strong>blocked</strong>[^<]*<span class=\"count\">\(\d+\)</span>", html)
    m = re.search(rf'<li id="{GLM_CELL}" class="e s-blocked" data-s="blocked" '
                  r'data-k="spec_decoding:mtp"><a href="([^"]+)"', html)
    assert m, "the GLM-5.2 mtp entry on multi_node_tp_pp is blocked at the pinned release"
    assert m.group(1) == f"recipes/zai-org/GLM-5.2.html#{GLM_CELL}"
    # the base command and modeless features are listed too
    assert 'id="cell-zai-org-glm-5.2-single_node_tp-base"' in html
    assert 'id="cell-zai-org-glm-5.2-single_node_tp-tool_calling"' in html
    # a recipe pinned to another release shows that release
    assert re.search(r"Qwen3-Next-80B-A3B-Instruct</a>.*?vLLM 0\.33\.0", html, re.DOTALL)


def test_index_marks_mixed_and_gated_entries(out):
    html = read(out / "index.html")
    mixed = re.search(r'<li id="cell-zai-org-glm-5.2-single_node_tp-spec_decoding-mtp"[^>]*>'
                      r'<a [^>]*aria-label="([^"]+)"', html)
    assert mixed
    assert mixed.group(1) == "spec_decoding:mtp: warning, differs across variants or hardware"
    gated = re.search(r'<li id="cell-qwen-qwen3-235b-a22b-multi_node_tp_pp-spec_decoding-eagle3"'
                      r'[^>]*><a [^>]*aria-label="([^"]+)"', html)
    assert gated and "gated by the recipe" in gated.group(1)


def test_recipe_page_shows_reason_message_evidence_and_works_from(out):
    html = read(out / "recipes/zai-org/GLM-5.2.html")
    assert f'href="{MODEL_PY}"' in html
    assert f'href="{SPEC_PY}"' in html
    assert "Pipeline parallelism is not supported for this model. Supported models implement the " \
           "`SupportsPP` interface." in html
    assert "works from 0.33.0" in html
    for step in fixture_db.PP_CHAIN:
        assert f"<li>{step.replace(chr(39), '&#39;').replace(chr(34), '&#34;')}</li>" in html
    # the permalink target exists once, on the pinned release, and every copy carries data-cell
    assert html.count(f'id="{GLM_CELL}"') == 1
    assert html.count(f'data-cell="{GLM_CELL}"') == 3 + 3  # 3 variants x 2 releases
    # both releases, the pinned one selected by default
    assert 'data-default="0.23.0"' in html
    assert 'id="release=0.23.0"' in html and 'id="release=0.33.0"' in html
    assert re.search(r"<span class=\"was\">was blocked at 0.23.0</span>", html)


def test_recipe_page_shows_platform_differences(out):
    html = read(out / "recipes/zai-org/GLM-5.2.html")
    cell = re.search(r'<td class="c s-warning mixed" '
                     r'data-cell="cell-zai-org-glm-5.2-single_node_tp-spec_decoding-mtp".*?</td>',
                     html, re.DOTALL)
    assert cell
    assert "rocm: mi355x" in cell.group(0) and "cuda" in cell.group(0)
    assert "MTP on ROCm falls back to the Triton attention backend" in html


def test_evidence_without_line_links_the_file(out):
    html = read(out / "recipes/meta-llama/Llama-3.3-70B-Instruct.html")
    blob = "https://github.com/vllm-project/vllm/blob"
    assert f'href="{blob}/v0.23.0/vllm/config/parallel.py"' in html
    assert f'href="{blob}/v0.33.0/vllm/model_executor/models/llama.py#L512"' in html


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
                assert value.startswith("https://github.com/vllm-project/vllm/blob/"), (page, value)
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


# ---------------------------------------------------------------------------- exports


def test_verdicts_json_is_v_verdict_plus_flags(out, built):
    data = json.loads(read(out / "verdicts.json"))
    assert len(data) == len(fixture_db.rows())
    assert list(data[0]) == V_VERDICT + V_VERDICT_APPENDED + ["gated", "pinned"]
    glm = [d for d in data if d["recipe"] == "models/zai-org/GLM-5.2.yaml" and d["mode"] == "mtp"
           and d["strategy"] == "multi_node_tp_pp" and d["vllm_version"] == "0.23.0"]
    assert glm and all(d["status"] == "blocked" and d["works_from"] == "0.33.0" and d["pinned"] == 1
                       for d in glm)


def test_database_is_copied(out):
    con = sqlite3.connect(out / "compat.db")
    n = con.execute("SELECT count(*) FROM v_verdict").fetchone()[0]
    con.close()
    assert n == len(fixture_db.rows())


def test_datasette_metadata(out):
    meta = yaml.safe_load(read(out / "metadata.yaml"))
    assert meta["title"] and meta["description"]
    tables = meta["databases"]["compat"]["tables"]
    con = sqlite3.connect(out / "compat.db")
    names = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table','view') "
        "AND name NOT LIKE 'sqlite_%'")]
    con.close()
    for name in names:
        assert tables[name]["description"], name
    assert list(tables["v_verdict"]["columns"]) == V_VERDICT + V_VERDICT_APPENDED
    assert all(tables["v_verdict"]["columns"].values())
    assert list(tables["v_finding"]["columns"]) == V_VERDICT + ["gated", "pinned", "works_from"]
    assert list(tables["v_arch_capability"]["columns"]) == V_ARCH
    assert all(tables["v_arch_capability"]["columns"].values())


# ---------------------------------------------------------------------------- naming


def test_cell_ids_and_refs():
    assert cell_id("zai-org-glm-5.2", "multi_node_tp_pp", "spec_decoding", "mtp") == GLM_CELL
    assert cell_id("x", "single_node_tp", "", "") == "cell-x-single_node_tp-base"
    assert cell_id("x", "single_node_tp", "tool_calling", "") == \
        "cell-x-single_node_tp-tool_calling"
    assert git_ref("0.23.0") == "v0.23.0" and git_ref("0.10.1rc1") == "v0.10.1rc1"
    assert git_ref("main", "abc123") == "abc123" and git_ref("main") is None
    links = evidence_links("vllm/config/model.py:1200; somewhere in the docs", "v0.23.0")
    assert links[0].url == MODEL_PY and links[1].url is None
    assert [link.url for link in evidence_links("vllm/x.py:3", None)] == [None]


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
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out/recipes/zai-org/GLM-5.2.html")
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
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
    from compat import db as dbm

    db = tmp_path / "empty.db"
    engine = dbm.engine_for(db)
    dbm.init_schema(engine)
    engine.dispose()
    report = build_site(db, tmp_path / "out")
    assert report.pages == 1
    assert "no verdicts yet" in read(tmp_path / "out/index.html")


def test_unpinned_recipe_defaults_to_newest_release(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET pinned = 0 WHERE recipe LIKE '%GLM-4.5-Air%'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out/recipes/zai-org/GLM-4.5-Air.html")
    assert 'data-default="0.33.0"' in html
    assert re.search(r"GLM-4.5-Air</a>.*?vLLM 0\.33\.0 \(newest scanned; no pin\)",
                     read(tmp_path / "out/index.html"), re.DOTALL)


def test_scales_to_the_real_recipe_count(tmp_path):
    """173 recipes x 2 releases x 3 variants x 2 platforms x 6 strategies x 5 modes, in seconds."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(verdict)") if r[1] != "id"]
    base = [dict(zip(cols, r, strict=True)) for r in con.execute(
        f"SELECT {', '.join(cols)} FROM verdict WHERE recipe LIKE '%GLM-5.2%'")]
    rows = []
    for i in range(172):
        for r in base:
            rows.append({**r, "recipe": f"models/org{i % 40}/Model-{i}.yaml"})
    insert = f"INSERT INTO verdict ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    con.executemany(insert, [tuple(r[c] for c in cols) for r in rows])
    con.commit()
    con.close()
    report = build_site(db, tmp_path / "out")
    assert report.pages == 1 + len(fixture_db.RECIPES) + 172
    assert report.seconds < 20
    assert (tmp_path / "out/index.html").stat().st_size < 3_000_000


def test_combinations_pinned_at_several_releases_show_the_lowest(tmp_path):
    """A build with explicit --vllm may mark every judged release pinned: no mixing of releases."""
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET pinned = 1 WHERE recipe LIKE '%GLM-5.2%'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    index = read(tmp_path / "out/index.html")
    assert re.search(r"GLM-5.2</a>.*?<small>vLLM 0\.23\.0</small>", index, re.DOTALL)
    assert re.search(rf'<li id="{GLM_CELL}" class="e s-blocked"', index)
    assert 'data-default="0.23.0"' in read(tmp_path / "out/recipes/zai-org/GLM-5.2.html")


def test_long_note_lists_are_capped(tmp_path):
    db = fixture_db.build(tmp_path / "in.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE verdict SET argv = json_array(json_array('', "
                "json_array('vllm', 'serve', id))) "
                "WHERE recipe LIKE '%GLM-5.2%' AND status = 'blocked'")
    con.commit()
    con.close()
    build_site(db, tmp_path / "out")
    html = read(tmp_path / "out/recipes/zai-org/GLM-5.2.html")
    note = html[html.index("Pipeline parallelism is not supported"):]
    note = note.split('<li class="note', 1)[0]
    assert note.count("<pre>vllm serve ") == site_mod.SHOWN_COMMANDS
    assert re.search(r"\d+ more: every command is in compat.db", note)


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
    assert '<th scope="col" data-strategy="none">no strategy</th>' in index
    assert 'id="cell-zai-org-glm-4.5-air-none-base"' in index


def test_targets_are_grouped_by_platform():
    pairs = [("cuda", "h100"), ("cuda", "b200"), ("rocm", ""), ("cuda", "b200")]
    assert site_mod.targets_text(pairs) == "cuda: b200, h100; rocm"
    assert site_mod.targets_text([("cuda", ""), ("cuda", "h100")]) == "cuda: any profile, h100"
