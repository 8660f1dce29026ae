"""vLLM's own argument handling (golden data) against vllm-compat's argument-level findings.

`tests/golden/serve-args-<ver>.json.gz` holds, for every argv the project synthesizes on the
recipes snapshot, what a vLLM release (RELEASES: 0.6.2 to 0.33.0) did with it when run for real
(tools/golden/serve_args.py: the CLI's parser, validate_parsed_serve_args, the API
server's validation, AsyncEngineArgs.from_cli_args). Per row:

* vLLM rejects <=> the engine has a blocked finding at the argument stage, and its message is
  vLLM's (pydantic's "For further information" links aside), at the same stage, same exception;
* where vLLM accepts, the engine has no argument finding at all (not even unknown);
* where vLLM rejects, the verdict of a command made of that argv is blocked (never ok/warning);
* where vLLM parses the argv, the values it parsed (those differing from their defaults) are the
  values vllm-compat's parser holds (a config object is compared by its class; a shell
  placeholder is not a value; the harness filled one in, the engine leaves it to the shell).

Every disagreement is printed before the assertion. vLLM-Omni rows (`--omni`, served by a
separate package) are left out, as the verdicts leave them out.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from compat import store
from compat.scan import release_facts
from compat.verdict.arguments import check_arguments

GOLDEN = Path(__file__).parent / "golden"
RELEASES = ("0.6.2", "0.6.4", "0.7.0", "0.8.5", "0.10.0", "0.11.0", "0.11.1", "0.12.0", "0.14.1", "0.17.0", "0.23.0", "0.33.0")


def load_golden(version: str) -> dict:
    with gzip.open(GOLDEN / f"serve-args-{version}.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def filled(message: str) -> str:
    """The replay's message with each `$NAME` as the golden harness filled it in before vLLM saw
    the argv (tools/golden/serve_args.py shell_value: a port 29550, anything else 10.0.0.1):
    vLLM echoes the value, the replay leaves the placeholder to the shell."""
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                  lambda m: "29550" if m.group(1).upper().endswith("PORT") else "10.0.0.1", message)


def norm(message: str) -> str:
    return "\n".join(line.rstrip() for line in message.strip().split("\n")
                     if not line.strip().startswith("For further information visit"))


def test_golden_files_cover_both_releases_and_all_stages() -> None:
    """The golden data is what the script wrote: sorted rows, the documented columns, real rejections."""
    for v in RELEASES:
        doc = load_golden(v)
        assert doc["vllm_version"] == v and doc["platform"] == "cuda"
        assert doc["columns"] == ["argv", "omni", "shell_vars", "stage", "exception", "message", "values"]
        rows = doc["rows"]
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        stages = {r[3] for r in rows}
        assert "ok" in stages and "parse" in stages
        assert all(r[3] in ("ok", *doc["stages"]) for r in rows)
        assert any(r[2] for r in rows)  # shell placeholders were expanded, as a shell would


def test_golden_files_cover_every_synthesized_argv(snapshot) -> None:
    """Every argv the replay synthesizes on the snapshot (each surface of the site, each node) was
    run through vLLM at both releases: a new argv without a golden row means the proof is stale
    (re-run tools/golden/make_serve_args.sh)."""
    from compat.recipes import enumerate_repo, load_repo

    omni: dict[tuple[str, ...], bool] = {}
    for c in enumerate_repo(load_repo(snapshot)).combinations:
        for _role, argv in c.argvs:
            omni[tuple(argv)] = omni.get(tuple(argv), True) and c.omni
    wanted = {a for a, o in omni.items() if not o}
    assert wanted
    for v in RELEASES:
        have = {tuple(r[0]) for r in load_golden(v)["rows"] if not r[1]}
        missing = sorted(wanted - have)
        for a in missing[:20]:
            print(f"{v}: no golden row: {' '.join(a)}")
        assert not missing, f"{v}: {len(missing)} of {len(wanted)} synthesized argvs have no golden row"


def _value_differences(golden: dict, namespace: dict, defaults: dict) -> dict:
    from compat.verdict.arguments import ShellValue
    from compat.verdict.serve_rules import ConfigObject

    def shown(value):
        if isinstance(value, ConfigObject):
            return f"<{value._cls}>" if value._data else None
        return json.loads(json.dumps(value, default=repr))

    ours = {}
    for dest, value in namespace.items():
        if dest in defaults and not isinstance(value, ShellValue) and shown(value) != shown(defaults[dest]):
            ours[dest] = shown(value)
    out = {}
    for dest in set(golden) | set(ours):
        want, got = golden.get(dest, "<default>"), ours.get(dest, "<default>")
        if isinstance(namespace.get(dest), ShellValue):
            continue
        # a config value equal to the class defaults ('{"x": false}') is vLLM's default object
        if want == "<default>" and isinstance(namespace.get(dest), ConfigObject):
            continue
        if want != got:
            out[dest] = (want, got)
    return out


@pytest.fixture(scope="module")
def knowledge(vllm_tree, tmp_path_factory):
    from compat.verdict.knowledge import load_knowledge

    path = tmp_path_factory.mktemp("golden-args") / "facts.db"
    out = {}
    with store.scratch(path) as db:
        for v in RELEASES:
            tree = vllm_tree(v)
            facts, _ = release_facts(tree)
            db.write_release_facts(facts)
            out[v] = load_knowledge(db, v, tree)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_argument_findings_agree_with_vllm(knowledge, snapshot, version: str) -> None:
    from compat.hf import ModelResolver
    from compat.recipes import Combination
    from compat.verdict.engine import Judge
    from compat.verdict.shell import read_placeholders

    k = knowledge[version]
    from compat.verdict.engine import argv_rewrite_verified

    assert argv_rewrite_verified(k)  # this release's parse_args is listed in data/argv_rewrites.yaml
    shell = read_placeholders(snapshot)
    judge = Judge(k, ModelResolver(trees=[k.tree]), shell=shell)
    doc = load_golden(version)
    rows = [r for r in doc["rows"] if not r[1]]
    # argparse's wording is the running Python's; the golden data is the venv's (3.11)
    same_python = tuple(int(x) for x in doc["python"].split(".")[:2]) == sys.version_info[:2]
    disagreements: list[str] = []
    rejected = accepted = 0
    defaults = k.serve_parser.defaults
    for argv, _omni, _vars, stage, exc, message, values in rows:
        findings = judge.arguments(argv) or []
        blocked = [f for f in findings if f.status == "blocked"]
        result = check_arguments(k, argv, shell)
        first = next((f for f in result.findings if f.status == "blocked"), None)
        shown = " ".join(argv)
        if stage != "parse" and result.namespace is not None:
            for dest, (want, got) in _value_differences(values, result.namespace, defaults).items():
                disagreements.append(f"parsed {dest}: vLLM {want!r}, vllm-compat {got!r} :: {shown}")
        if stage == "ok":
            accepted += 1
            if findings:
                disagreements.append(f"vLLM accepts, vllm-compat says {findings[0].status}: "
                                     f"{findings[0].step} :: {shown}")
            continue
        rejected += 1
        if not blocked or first is None:
            disagreements.append(f"vLLM rejects ({stage} {exc}: {norm(message)[:200]}), vllm-compat finds "
                                 f"{[f.status for f in findings] or 'nothing'} :: {shown}")
            continue
        if (same_python and norm(filled(blocked[0].message)) != norm(message)) or (first.stage, first.exception) != (
                stage, exc):
            disagreements.append(f"message differs: vLLM {stage} {exc}: {norm(message)[:300]!r}\n"
                                 f"   vllm-compat {first.stage} {first.exception}: {norm(blocked[0].message)[:300]!r}"
                                 f" :: {shown}")
            continue
        combo = Combination(recipe="", model_id=argv[2], variant="", strategy="", feature="", mode="",
                            hardware="", platform="cuda", argvs=(("", tuple(argv)),), vllm_pin="",
                            docker_pin=None, gated=False, omni=False, problems=())
        status = judge.judge(combo).status
        if status != "blocked":
            disagreements.append(f"vLLM rejects, the verdict is {status} :: {shown}")
    for d in disagreements:
        print(d)
    if not same_python:
        print(f"messages not compared: golden data from Python {doc['python']}, running {sys.version.split()[0]}")
    print(f"{version}: {len(rows)} non-omni argvs, vLLM rejects {rejected}, accepts {accepted}; "
          f"{len(rows) - len(disagreements)} agree ({100 * (len(rows) - len(disagreements)) / len(rows):.2f}%)")
    assert not disagreements
    assert rejected and accepted
