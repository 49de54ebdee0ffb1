"""src/mmir/pipeline/schemas/params.schema.yaml is generated from the models (mmir.config.schema) and kept equal to them."""

import json

import jsonschema
import pytest
import yaml
from pydantic import Field, create_model

from mmir.config import PROJECT_ROOT, SCHEMA_PATH, read_config, validate_config
from mmir.config.models import EvaluationConfig, Params
from mmir.config.schema import generate, main, render


def test_committed_schema_is_the_generated_one():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(), "run: python -m mmir.config.schema --write"
    assert main(["--check"]) == 0


def test_a_default_changed_in_the_model_alone_fails_the_check():
    # EvaluationConfig with top_k's default changed, and a Params that uses it: the committed schema no longer matches
    evaluation = create_model("EvaluationConfig", __base__=EvaluationConfig,
                              top_k=(int, Field(100, ge=1, description="depth of every run file")))
    changed = create_model("Params", __base__=Params, evaluation=(evaluation, Field(evaluation(), description="how runs are scored")))
    committed = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert render(changed) != SCHEMA_PATH.read_text(encoding="utf-8")
    assert committed["$defs"]["EvaluationConfig"]["properties"]["top_k"]["default"] == 1000
    assert generate(changed)["$defs"]["EvaluationConfig"]["properties"]["top_k"]["default"] == 100


def test_schema_keeps_the_rules_of_the_models():
    schema = generate()
    bm25 = schema["$defs"]["BM25System"]
    assert bm25["additionalProperties"] is False and bm25["properties"]["k1"] == {
        "type": "number", "default": 0.9, "description": "term-frequency saturation", "exclusiveMinimum": 0}
    assert schema["$defs"]["LocalDataset"]["required"] == ["source", "root"]
    assert "default" not in schema["$defs"]["HubDataset"]["properties"]["root"]  # a setting with no default
    assert schema["properties"]["systems"]["propertyNames"] == {"pattern": "^[A-Za-z0-9][A-Za-z0-9_.+:-]*$"}


@pytest.mark.parametrize("overlays", [[], ["workflow/configs/offline-full.yaml"], ["workflow/configs/mm-bright-hub.yaml"]])
def test_filled_project_configs_satisfy_the_generated_schema(overlays):
    raw, _ = read_config(PROJECT_ROOT / "params.yaml", [PROJECT_ROOT / o for o in overlays])
    filled = validate_config(raw)
    jsonschema.Draft202012Validator(generate()).validate(json.loads(json.dumps(filled)))
    assert Params.model_validate(filled) == Params.model_validate(validate_config(json.loads(json.dumps(filled))))
