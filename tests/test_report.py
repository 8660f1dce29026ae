"""check and explain as a maintainer reads them: one line per cause, annotations, suggestions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_kit import run

HERE = Path(__file__).resolve().parent
RECIPES = HERE / "fixtures" / "recipes" / "minimal"
MINI = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "c.db"
    r = run("build", "--recipes", str(RECIPES), "--vllm-src", f"{MINI}=0.0.1", "--hf-config-dir", str(HF),
            "--db", str(path))
    assert r.returncode == 0, r.stderr
    return path


def test_check_prints_one_line_per_recipe_and_cause(db: Path) -> None:
    r = run("check", "--db", str(db))
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    report = json.loads(run("check", "--db", str(db), "--format", "json").stdout)
    assert len(lines) == len(report["causes"]) + 1  # + the summary line
    keys = [(c["recipe"], c["label"]) for c in report["causes"]]
    assert len(keys) == len(set(keys))
    for line, cause in zip(lines, report["causes"], strict=False):
        assert line.startswith(f"{cause['recipe']}:{cause['line']}: {cause['label']} blocks ")
        assert ("fix (" in line) or ("no automatic fix: " in line)


def test_verbose_lists_the_rows(db: Path) -> None:
    plain = run("check", "--db", str(db)).stdout.splitlines()
    verbose = run("check", "--db", str(db), "-v").stdout.splitlines()
    assert len(verbose) > len(plain) and any(line.startswith("    vllm 0.0.1 ") for line in verbose)
    assert any(line.startswith("    e.g.: vllm serve acme/") for line in verbose)  # a command to copy


def test_github_annotations_point_at_the_recipe_line(db: Path) -> None:
    r = run("check", "--db", str(db), "--format", "github")
    assert r.returncode == 1
    text = (RECIPES / "models" / "acme" / "Widget.yaml").read_text().splitlines()
    for line in r.stdout.strip().splitlines():
        m = re.match(r"^::error file=(models/[^,]+),line=(\d+),title=[^:]+::(.+)$", line)
        assert m, line
        assert "\n" not in m.group(3)
        if m.group(1) == "models/acme/Widget.yaml":
            assert 1 <= int(m.group(2)) <= len(text)


def test_explain_names_every_platform_and_hardware_and_the_command(db: Path) -> None:
    r = run("explain", "acme/Widget", "multi_node_tp_pp", "spec_decoding:mtp", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "holds on cuda: b200, gb200, h200 (variant default); rocm: mi300x" in r.stdout
    assert "command (variant default): vllm serve acme/Widget " in r.stdout
    assert "--master-addr $HEAD_IP" in r.stdout  # shell variables stay expandable, as on the site
    assert "cause: " in r.stdout


def test_explain_without_a_mode_explains_each_mode(db: Path) -> None:
    r = run("explain", "acme/Widget", "multi_node_tp_pp", "spec_decoding", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "spec_decoding:mtp" in r.stdout and "spec_decoding:eagle" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["acme/Widgte", "multi_node_tp_pp"], "did you mean acme/Widget"),
    (["acme/Widget", "multi_node_tp"], "did you mean multi_node_tp_pp"),
    (["acme/Widget", "multi_node_tp_pp", "spec_decodng"], "did you mean spec_decoding"),
    (["acme/Widget", "multi_node_tp_pp", "spec_decoding:mpt"], "did you mean mtp"),
    (["acme/Widget", "multi_node_tp_pp", "--vllm", "9.99.0"], "this database holds 0.0.1"),
])
def test_mistyped_explain_suggests(db: Path, args: list[str], needle: str) -> None:
    r = run("explain", *args, "--db", str(db))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_gate_messages_are_filled_as_vllm_fills_them() -> None:
    from compat.verdict import gates

    ctx = {"spec_method": "eagle3", "pp": 2, "tp": 8, "dcp": 3, "draft_tp": 2, "dp": 1}
    cap = {"class_path": "vllm.model_executor.models.kimi_k25.KimiK25ForConditionalGeneration"}
    aux = next(r for r in gates.rules() if r.id == "aux-hidden-states-over-pp")
    assert gates.message(aux, ctx, cap) == "KimiK25ForConditionalGeneration does not support eagle3 with pipeline parallelism"
    for rule in gates.rules():
        text = gates.message(rule, ctx, cap)
        assert "{" not in text.replace("{}", ""), (rule.id, text)  # unknown fields read <name>, never {name}
        assert "compat." not in rule.description.split(". ")[0], rule.id  # no internals in findings


def test_diff_text_names_targets_words_configs_and_says_what_it_leaves_out() -> None:
    from compat.diff import render_text

    d = {"from": "0.23.0", "to": "0.33.0",
         "verdicts": {"changed": 0, "compared": 0, "by_recipe": {}},
         "capabilities": {"added": [], "removed": [], "changed": [
             {"platform": "cuda", "arch": f"A{i}", "flags": {"supports_pp": [0, 1]}, "class": None} for i in range(15)]},
         "spec_methods": {"added": [f"m{i}" for i in range(9)], "removed": []},
         "draft_parallel": [{"method": "mtp", "from": {"pp": "target", "ep": "off"}, "to": {"pp": "one", "ep": "target"},
                             "evidence": "vllm/config/speculative.py:1905"}],
         "drafts": [{"platform": "cuda", "method": "mtp", "target": "", "from": None, "to": None}],
         "gates": [{"rule": "r", "from": None, "to": "verified"}],
         "flags": {"added": [], "removed": []}, "tool_parsers": {"added": [], "removed": []},
         "reasoning_parsers": {"added": [], "removed": []}, "messages": {"new": [], "gone": []}}
    text = render_text(d)
    assert "... and 3 more (--format json lists all)" in text
    assert "... and 3 more)" in text  # the method list says it is cut
    assert "PP copied from the target, EP off -> PP forced to 1, EP copied from the target" in text
    assert "draft of (unknown target)" in text and "draft of :" not in text
    assert "('target'" not in text and "None ()" not in text and "r: absent -> verified" in text
