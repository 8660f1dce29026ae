"""The fix stage as input/output tables: a tiny recipe, two synthetic releases -> cause and fix.

Each fix kind has a recipe where it is the right fix and the plan is checked by what it
edits; switching a fixer off makes its row fail. Releases: 0.1.0 (the pin) and 0.2.0,
which adds `--newflag` and can force the draft's PP to 1.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path


from compat.fix.context import Context, Row
from compat.fix.edits import apply
from compat.fix.plan import build_cases, plan_recipe
from compat.recipes import enumerate_repo, load_repo
from compat.verdict.batch import CauseBook, Sweep, later_than
from compat.verdict.cause import renderer
from compat.verdict.engine import Judge
from compat.verdict.releases import ReleasePool
from tests.engine_kit import MODELS, release

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "recipes" / "minimal"
EAGLE3 = json.dumps({"method": "eagle3", "model": "acme/eagle3-nopp", "num_speculative_tokens": 1})

TAXONOMY = """\
hardware_profiles:
  h200: {brand: NVIDIA, generation: hopper, gpu_count: 8, vram_gb: 1128}
"""
STRATEGIES = {
    "single_node_tp": 'name: single_node_tp\ndeploy_type: single_node\nvllm_args: []\n'
                      'parallel_flag: "--tensor-parallel-size"\n',
    "multi_node_tp": 'name: multi_node_tp\ndeploy_type: multi_node\nparallelism: tp\nvllm_args: []\n'
                     'parallel_flag: "--tensor-parallel-size"\n',
    "multi_node_tp_pp": 'name: multi_node_tp_pp\ndeploy_type: multi_node\nparallelism: tp_pp\nvllm_args: []\n'
                        'parallel_flag: "--tensor-parallel-size"\n',
}


def recipe(features: str, *, variants: str = "", strategies: str = "[single_node_tp, multi_node_tp, multi_node_tp_pp]",
           base_args: str = "[]", opt_in: str = "[]") -> str:
    variants = variants or "  default: {precision: bf16, vram_minimum_gb: 10}\n"
    return textwrap.dedent("""\
        meta:
          title: X
          tasks: [text]
        model:
          model_id: acme/moe-pp
          min_vllm_version: "0.1.0"
          docker_image: "vllm/vllm-openai:v0.1.0"
          architecture: moe
          base_args: {base_args}
        features:
        {features}
        opt_in_features: {opt_in}
        variants:
        {variants}
        compatible_strategies: {strategies}
        """).format(features=textwrap.indent(textwrap.dedent(features), "  ").rstrip(),
                    variants=variants.rstrip(), strategies=strategies, base_args=base_args, opt_in=opt_in)


def checkout(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "recipes"
    (root / "models" / "acme").mkdir(parents=True)
    (root / "strategies").mkdir()
    (root / "taxonomy.yaml").write_text(TAXONOMY)
    for name, body in STRATEGIES.items():
        (root / "strategies" / f"{name}.yaml").write_text(body)
    (root / "models" / "acme" / "x.yaml").write_text(text)
    return root


def plan(root: Path, index: list[str] | None = None, **newer: object):
    """(plans by cause label, case, ctx) for models/acme/x.yaml pinned at 0.1.0; `index`: the
    releases on the package index (None: offline)."""
    repo = load_repo(root)
    judges = {"0.1.0": Judge(release("0.1.0"), MODELS),
              "0.2.0": Judge(release("0.2.0", flags=("--newflag",), **newer), MODELS)}
    pool = ReleasePool(judges, MODELS, index=index)
    book = CauseBook()
    sweep = Sweep(pool, renderer(repo), book)
    judged: dict[str, list[Row]] = {}
    for c in enumerate_repo(repo).combinations:
        for j in sweep.judge(c, [("0.1.0", 1, 1)], 0, later_than(["0.1.0", "0.2.0"])):
            if j.row["judged"]:
                judged.setdefault(c.recipe, []).append(Row(c, "0.1.0", j.outcome, tuple(j.cause_ids), j.cause_keys))
    cases = build_cases(repo, judged, book.rows, pinned=True)
    ctx = Context(repo, pool, lambda pin: pin if pin in judges else None)
    assert cases, "nothing blocked"
    planned = plan_recipe(cases[0], ctx)
    labels = {cases[0].causes[cid]["label"]: p for cid, p in planned.items()}
    return labels, cases[0], ctx


def test_gate_for_a_feature_that_fails_on_one_strategy(tmp_path: Path) -> None:
    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        """, opt_in="[spec_decoding]"))
    got, _, _ = plan(root)
    p = got["spec_decoding"]
    assert p.kind == "gate", p
    edit = p.edits[0]
    assert edit.path == ("features", "spec_decoding", "strategies")
    assert edit.value == ["single_node_tp", "multi_node_tp"]


def test_gate_also_for_a_feature_on_by_default(tmp_path: Path) -> None:
    """Kimi-K2.5's case: not opt-in, so the base command carries it; the gate still applies."""
    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        """))
    got, _, _ = plan(root)
    assert got["spec_decoding"].kind == "gate"


def test_a_later_release_that_fixes_it_makes_it_a_gate_still_first(tmp_path: Path) -> None:
    """Preference (a) before (c): the gate is proposed even though 0.2.0 forces the draft PP to 1."""
    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        """, opt_in="[spec_decoding]"))
    got, case, _ = plan(root, draft_pp="one")
    assert got["spec_decoding"].kind == "gate" and got["spec_decoding"].works_from == "0.2.0"


def test_mode_restriction_where_the_failure_follows_the_variant(tmp_path: Path) -> None:
    root = checkout(tmp_path, recipe("""\
        parallel:
          description: expert parallel or not
          default_mode: plain
          modes:
            ep:
              args: ["--enable-expert-parallel"]
            plain:
              args: ["--max-model-len", "4096"]
        """, opt_in="[parallel]", variants="""\
          default: {precision: bf16, vram_minimum_gb: 10}
          dense: {model_id: acme/dense-pp, precision: bf16, vram_minimum_gb: 10}
        """))
    got, _, _ = plan(root)
    p = got["parallel:ep"]
    assert p.kind == "mode_variants", p
    assert p.edits[0].path == ("features", "parallel", "modes", "ep", "variants")
    assert p.edits[0].value == ["default"]


def test_pin_bump_to_the_first_release_that_accepts_it_with_the_docker_tag(tmp_path: Path) -> None:
    root = checkout(tmp_path, recipe("""\
        fast:
          description: a flag only 0.2.0 has
          args: ["--newflag"]
        """, opt_in="[fast]"))
    got, _, _ = plan(root)
    p = got["fast"]
    assert p.kind == "pin_bump", p
    assert {e.path: e.value for e in p.edits} == {("model", "min_vllm_version"): "0.2.0",
                                                 ("model", "docker_image"): "vllm/vllm-openai:v0.2.0"}


def test_spelling_when_no_release_has_the_flag_and_one_candidate_exists(tmp_path: Path) -> None:
    root = checkout(tmp_path, recipe("""\
        tools:
          description: a typo
          args: ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--tool-parser-plugn", "p.py"]
        """, opt_in="[tools]"))
    got, _, _ = plan(root)
    p = got["tools"]
    assert p.kind == "spelling", p
    assert [(e.op, e.old, e.value) for e in p.edits] == [("replace_item", "--tool-parser-plugn", "--tool-parser-plugin")]


def test_one_argv_item_holding_a_flag_and_value_is_split(tmp_path: Path) -> None:
    root = checkout(tmp_path, recipe("""\
        reasoning:
          description: fine
          args: ["--reasoning-parser", "deepseek_r1"]
        """, base_args='["--max-model-len 4096"]'))
    got, _, _ = plan(root)
    p = got["model.base_args"]
    assert p.kind == "spelling" and p.edits[0].value == ["--max-model-len", "4096"], p


def test_no_automatic_fix_says_why(tmp_path: Path) -> None:
    """The variant's model has no PP in any release: removing the variant clears it (the culprit),
    but no edit the synthesizer honours fixes it without taking the variant away."""
    root = checkout(tmp_path, recipe("""\
        reasoning:
          description: fine
          args: ["--reasoning-parser", "deepseek_r1"]
        """, variants="  default: {model_id: acme/dense-nopp, precision: bf16, vram_minimum_gb: 10}\n"))
    got, _, _ = plan(root)
    p = got["variant default"]
    assert p.kind == "none" and "gate:" in p.why and "pin_bump:" in p.why, p


def test_a_fix_is_never_one_that_takes_away_a_working_command(tmp_path: Path) -> None:
    """eagle3 fails on PP but a second mode works there: no whole-feature gate."""
    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: two modes
          default_mode: eagle3
          modes:
            eagle3:
              args: ["--speculative-config", '{EAGLE3}']
            ngram:
              args: ["--speculative-config", '{json.dumps({"method": "ngram", "num_speculative_tokens": 2})}']
        """, opt_in="[spec_decoding]"))
    got, _, _ = plan(root)
    p = got["spec_decoding:eagle3"]
    assert p.kind == "none" and "would take them away" in p.why, p


def test_apply_writes_round_trip_idempotent_and_refuses_a_changed_file(tmp_path: Path) -> None:
    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        """, opt_in="[spec_decoding]"))
    got, case, ctx = plan(root)
    edits = got["spec_decoding"].edits
    from compat.fix.yaml_edit import edit_recipe_text, load_data

    path = root / case.path
    text = path.read_text()
    new = edit_recipe_text(text, edits, apply(load_data(text), edits)).text
    assert load_data(new) == apply(load_data(text), edits)
    assert "# vllm-compat:" in new
    changed = [line for line in new.splitlines() if line not in text.splitlines()]
    assert len(changed) == 2  # the comment and the allowlist, nothing else


def test_a_plan_that_fails_re_judging_is_not_kept(tmp_path: Path) -> None:
    """Re-judging is the last word: a gate that would take a working strategy away is dropped."""
    from compat.fix.context import Proposal
    from compat.fix.edits import Edit
    from compat.fix.plan import _verified

    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        """, opt_in="[spec_decoding]"))
    got, case, ctx = plan(root)
    cid = next(cid for cid, c in case.causes.items() if c["label"] == "spec_decoding")
    blocked = {cid: case.blocked_by(cid)}
    too_wide = Proposal("gate", (Edit("set", ("features", "spec_decoding", "strategies"), ["multi_node_tp"],
                                      after="description"),), "gate spec_decoding off all but multi_node_tp")
    reasons: dict[int, list[str]] = {cid: []}
    assert _verified(case, ctx, {cid: too_wide}, blocked, reasons) == {}
    assert "failed re-judging: would break single_node_tp" in reasons[cid][0], reasons
    right = got["spec_decoding"]
    assert _verified(case, ctx, {cid: Proposal(right.kind, tuple(right.edits), right.summary)}, blocked, {cid: []})


def test_every_fix_comment_is_one_line_of_at_most_120_characters(tmp_path: Path) -> None:
    """Issue 19: the cause, the release and the evidence file:line, never cut with an ellipsis."""
    from compat.fix.wording import LIMIT

    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        fast:
          description: a flag only 0.2.0 has
          args: ["--newflag"]
        tools:
          description: a typo
          args: ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--tool-parser-plugn", "p.py"]
        """, opt_in="[spec_decoding, fast, tools]", base_args='["--max-model-len 4096"]'))
    got, _, _ = plan(root)
    comments = [e.comment for p in got.values() for e in p.edits if e.comment]
    assert len(comments) >= 3, got
    for c in comments:
        assert len(c) <= LIMIT and "…" not in c and "\n" not in c, c
    gate = got["spec_decoding"].edits[0].comment
    assert gate.startswith("vllm-compat: spec_decoding cannot start on multi_node_tp_pp at vLLM 0.1.0"), gate


def nopp_recipe(variants: str = "") -> str:
    """A model no release runs with PP, offered on multi_node_tp_pp."""
    return recipe("""\
        reasoning:
          description: fine
          args: ["--reasoning-parser", "deepseek_r1"]
        """, variants=variants).replace("model_id: acme/moe-pp", "model_id: acme/dense-nopp")


def test_strategy_dropped_when_no_release_on_the_index_starts_it(tmp_path: Path) -> None:
    got, case, ctx = plan(checkout(tmp_path, nopp_recipe()), index=["0.1.0", "0.2.0"])
    p = got["the strategy"]
    assert p.kind == "strategy", p
    assert [(e.op, e.path, e.value) for e in p.edits] == [
        ("set", ("compatible_strategies",), ["single_node_tp", "multi_node_tp"])]
    assert p.edits[0].comment.startswith("vllm-compat: multi_node_tp_pp dropped"), p.edits[0].comment
    assert "0.2.0" in p.edits[0].comment and len(p.edits[0].comment) <= 120


def test_strategy_kept_offline_and_where_a_command_on_it_starts(tmp_path: Path) -> None:
    got, _, _ = plan(checkout(tmp_path, nopp_recipe()))  # offline: a later release may start it
    assert got["the strategy"].kind == "none" and "strategy: the package index is unreachable" in got[
        "the strategy"].why
    both = nopp_recipe(variants="""\
          default: {precision: bf16, vram_minimum_gb: 10}
          pp: {model_id: acme/dense-pp, precision: bf16, vram_minimum_gb: 10}
        """)
    got, _, _ = plan(checkout(tmp_path / "b", both), index=["0.1.0", "0.2.0"])
    p = got["the strategy"]
    assert p.kind == "none" and "multi_node_tp_pp starts in" in p.why and "take them away" in p.why, p


def test_strategy_never_dropped_when_it_is_the_default_strategy(tmp_path: Path) -> None:
    text = nopp_recipe() + "default_strategy: multi_node_tp_pp\n"
    got, _, _ = plan(checkout(tmp_path, text), index=["0.1.0", "0.2.0"])
    assert got["the strategy"].kind == "none" and "default_strategy" in got["the strategy"].why


def reviews(root: Path, **newer: object):
    """Ungate proposals for models/acme/x.yaml, judged at its pin (0.1.0 or 0.2.0)."""
    from compat.fix.ungate import review_recipe

    repo = load_repo(root)
    judges = {"0.1.0": Judge(release("0.1.0"), MODELS),
              "0.2.0": Judge(release("0.2.0", flags=("--newflag",), **newer), MODELS)}
    ctx = Context(repo, ReleasePool(judges, MODELS, index=None), lambda pin: pin if pin in judges else None)
    recipe_ = next(iter(repo.recipes.values()))
    return review_recipe(recipe_, ctx, "0.1.0")


GATED_EAGLE3 = f"""\
    spec_decoding:
      description: eagle3
      # PP: the eagle3 draft inherits the target's PP size and lacks SupportsPP.
      strategies: [single_node_tp, multi_node_tp]
      args: ["--speculative-config", '{EAGLE3}']
    """


def test_ungate_when_the_pin_moves_to_a_release_where_the_hidden_commands_start(tmp_path: Path) -> None:
    """GLM-5.2's case in small: gated off multi_node_tp_pp for a draft PP failure, pin moved to the
    release that forces the draft's PP to 1."""
    text = recipe(GATED_EAGLE3, opt_in="[spec_decoding]").replace('"0.1.0"', '"0.2.0"')
    got = reviews(checkout(tmp_path, text), draft_pp="one")
    assert len(got) == 1, got
    r = got[0]
    assert r.gate.path == ("features", "spec_decoding", "strategies") and r.opened == ("multi_node_tp_pp",)
    edit = r.proposal.edits[0]
    assert (edit.op, edit.path) == ("delete", ("features", "spec_decoding", "strategies"))
    assert r.proposal.summary.startswith("remove features.spec_decoding.strategies: the 1 command(s)")
    assert r.proposal.works_from == "0.2.0" and "from 0.2.0" in r.proposal.summary  # 0.1.0 fails
    assert "reasons other than startup" in r.proposal.note
    assert "the recipe says: PP: the eagle3 draft inherits" in r.proposal.note
    assert len(edit.comment) <= 120


def test_no_ungate_at_the_pin_where_the_gate_is_needed(tmp_path: Path) -> None:
    text = recipe(GATED_EAGLE3, opt_in="[spec_decoding]")
    assert reviews(checkout(tmp_path, text), draft_pp="one") == []


def test_ungate_widens_a_gate_where_only_some_hidden_strategies_start(tmp_path: Path) -> None:
    """Kimi-K3's shape: scoped to one strategy; another hidden strategy starts, a third does not."""
    text = recipe(GATED_EAGLE3.replace("[single_node_tp, multi_node_tp]", "[single_node_tp]"),
                  opt_in="[spec_decoding]")
    got = reviews(checkout(tmp_path, text))
    assert len(got) == 1
    r = got[0]
    assert r.opened == ("multi_node_tp",) and set(r.closed) == {"multi_node_tp_pp"}
    edit = r.proposal.edits[0]
    assert (edit.op, edit.value) == ("set", ["single_node_tp", "multi_node_tp"])
    assert "still hidden: multi_node_tp_pp: blocked at vLLM 0.1.0" in r.proposal.note


def test_ungate_a_mode_restricted_to_variants(tmp_path: Path) -> None:
    text = recipe("""\
        parallel:
          description: expert parallel or not
          default_mode: plain
          modes:
            ep:
              variants: [default]
              args: ["--enable-expert-parallel"]
            plain:
              args: ["--max-model-len", "4096"]
        """, opt_in="[parallel]", variants="""\
          default: {precision: bf16, vram_minimum_gb: 10}
          other: {model_id: acme/moe-pp, precision: fp8, vram_minimum_gb: 10}
          dense: {model_id: acme/dense-pp, precision: bf16, vram_minimum_gb: 10}
        """)
    got = reviews(checkout(tmp_path, text))
    assert len(got) == 1
    r = got[0]
    assert r.gate.path == ("features", "parallel", "modes", "ep", "variants")
    assert r.opened == ("other",) and "dense" in r.closed  # EP needs experts: the dense model fails
    assert r.proposal.edits[0].value == ["default", "other"]


def test_a_finding_left_unknown_at_a_release_is_not_gone_there() -> None:
    """A pin bump clears a cause at a release only where its finding is neither blocked nor
    unknown: at a release whose argument replay is unverified the same finding is unknown (and
    the flag check blocks under another key), so it must not count as the release that fixes it."""
    from types import SimpleNamespace

    from compat.fix.pin_bump import gone_at

    def ctx(keys: list[tuple[str, str]]) -> SimpleNamespace:
        return SimpleNamespace(pool=SimpleNamespace(outcome=lambda release, combo: SimpleNamespace(keys=keys)))

    row = SimpleNamespace(combo=None)
    key = "arg:unrecognized:--mm-encoder-tp-mode data"
    assert not gone_at(ctx([("blocked", key)]), "0.9.2", row, (key,))
    assert not gone_at(ctx([("unknown", key), ("blocked", "flag:--mm-encoder-tp-mode")]), "0.9.0", row, (key,))
    assert gone_at(ctx([("ok", "draft:mtp")]), "0.10.2", row, (key,))


def test_each_bump_keeps_its_own_edits_after_the_follow_up(tmp_path: Path) -> None:
    """Causes pinned by different `min_vllm_version`s bump different paths (DeepSeek-V4-Flash:
    a variant's own pin, and the recipe pin its other variants share). Planning again after the
    bumps (the follow-up) attached the first bump's edits to every bump cause, so the other
    pins were never written and the fix loop left their commands blocked."""
    from compat.fix import pin_bump
    from compat.fix.context import Proposal
    from compat.fix.edits import Edit
    from compat.fix.plan import _follow_up

    variants = """\
      a:
        precision: bf16
        vram_minimum_gb: 10
        min_vllm_version: "0.1.0"
        hardware_overrides:
          hopper: {extra_args: ["--newflag"]}
      b:
        precision: fp8
        vram_minimum_gb: 10
    """
    root = checkout(tmp_path, recipe("", variants=textwrap.indent(textwrap.dedent(variants), "  ")))
    _, case, ctx = plan(root)
    own = Proposal(pin_bump.KIND, (Edit("set", ("variants", "a", "min_vllm_version"), "0.2.0"),), "bump a", "0.2.0")
    shared = Proposal(pin_bump.KIND, (Edit("set", ("model", "min_vllm_version"), "0.2.0"),), "bump model", "0.2.0")
    kept = {1: own, 2: shared}
    _follow_up(case, ctx, kept, {1: list(case.rows), 2: list(case.rows)}, {1: [], 2: []})
    assert [e.path for e in kept[1].edits][:1] == [("variants", "a", "min_vllm_version")], kept
    assert [e.path for e in kept[2].edits][:1] == [("model", "min_vllm_version")], kept


def test_the_follow_up_plans_again_until_nothing_new(monkeypatch) -> None:
    """Each round plans on the recipe as the fixes so far leave it: a bump to 0.5.2 uncovers a
    bump to 0.6.0, which uncovers one to 0.11.1 (Phi-4-reasoning, pinned at 0.4.2); every
    round's edits reach the kept fix, the last winning, and a round that finds nothing new ends."""
    from types import SimpleNamespace

    from compat.fix import plan as planmod
    from compat.fix.context import Proposal
    from compat.fix.edits import Edit

    pin = ("model", "min_vllm_version")
    rounds = iter(["0.6.0", "0.11.1", None])
    seen: list[list] = []

    def judged_case(case, edits, ctx):
        seen.append([e.value for e in edits if e.path == pin])
        return case

    def plan_recipe(case, ctx, depth=0):
        nxt = next(rounds)
        if nxt is None:
            return {}
        return {1: planmod.Planned("pin_bump", f"bump to {nxt}", [Edit("set", pin, nxt)], works_from=nxt)}

    monkeypatch.setattr(planmod, "judged_case", judged_case)
    monkeypatch.setattr(planmod, "plan_recipe", plan_recipe)
    monkeypatch.setattr(planmod, "rejudge", lambda *a, **k: SimpleNamespace(ok=True))
    case = SimpleNamespace(pinned=True, rows=[])
    kept = {7: Proposal("pin_bump", (Edit("set", pin, "0.5.2"),), "bump to 0.5.2", "0.5.2")}
    planmod._follow_up(case, None, kept, {7: []}, {7: []})
    assert seen == [["0.5.2"], ["0.6.0"], ["0.11.1"]]
    assert planmod._merge([kept[7]])[0].value == "0.11.1"
    assert kept[7].summary == "bump to 0.5.2; there, bump to 0.6.0; bump to 0.11.1"


def test_rejudge_at_explicit_releases_compares_each_row_with_its_own_release(tmp_path: Path) -> None:
    """Judged at 0.1.0 and 0.2.0 together, a command that starts at 0.2.0 and fails at 0.1.0 is not
    'broken' by a gate that leaves it as it was at both (it was read against every release)."""
    from compat.fix.context import Case
    from compat.fix.edits import Edit
    from compat.fix.rejudge import rejudge
    from compat.recipes.repo import Recipe

    root = checkout(tmp_path, recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        newer:
          description: a flag 0.2.0 adds
          args: ["--newflag"]
        """, opt_in="[spec_decoding, newer]"))
    repo = load_repo(root)
    judges = {"0.1.0": Judge(release("0.1.0"), MODELS),
              "0.2.0": Judge(release("0.2.0", flags=("--newflag",)), MODELS)}
    pool = ReleasePool(judges, MODELS)
    rows = [Row(c, v, judges[v].judge(c), (), {}) for c in enumerate_repo(repo).combinations for v in judges]
    newer = [r for r in rows if r.combo.feature == "newer" and r.combo.strategy == "single_node_tp"]
    assert {r.release: r.outcome.status for r in newer} == {"0.1.0": "blocked", "0.2.0": "ok"}
    path = "models/acme/x.yaml"
    case = Case(path, Recipe(path, repo.recipes[path].data), rows, {}, pinned=False)
    ctx = Context(repo, pool, lambda pin: pin if pin in judges else None)
    gate = [Edit("set", ("features", "spec_decoding", "strategies"), ["single_node_tp", "multi_node_tp"])]
    result = rejudge(case, gate, [], ctx, releases=["0.1.0", "0.2.0"])
    assert not any(k[3] == "newer" for k in result.broken), result.broken
