"""src/mmir/pipeline/schemas/params.schema.yaml, generated from :class:`mmir.config.models.Params`.

``python -m mmir.config.schema --write`` rewrites it; ``--check`` exits 1 when the committed file differs
(tests/unit/test_config_schema.py checks the same).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml
from pydantic import BaseModel

from mmir.config import SCHEMA_PATH
from mmir.config.models import Params

HEADER = """\
# GENERATED from the pydantic models of src/mmir/config/models (mmir.config.models.Params): do not edit.
# Change a setting in its model, then regenerate with:  python -m mmir.config.schema --write
# (tests/unit/test_config_schema.py fails while this file and the models differ).
"""
_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
_NUMBER = [{"type": "integer"}, {"type": "number"}]


def _clean(node: Any) -> Any:
    """Pydantic's schema made plain JSON schema: no titles, ``int | float`` as ``number`` with standard bounds, named
    mappings with ``propertyNames``, no ``default: null`` on settings that have no default."""
    if isinstance(node, list):
        return [_clean(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "properties":  # a mapping of field names, not of keywords
            out[key] = {name: _clean(sub) for name, sub in value.items()}
        else:
            out[_BOUNDS.get(key, key)] = _clean(value)
    if len(out.get("patternProperties", {})) == 1:  # dict[Name, X]: every key must match (not only the matching ones)
        (pattern, sub), = out.pop("patternProperties").items()
        out["propertyNames"] = {"pattern": pattern}
        out["additionalProperties"] = sub
    if out.get("anyOf") == _NUMBER:
        del out["anyOf"]
        out = {"type": "number", **out}
    if out.pop("x-unset", False):
        out.pop("default", None)
    return out


def generate(model: type[BaseModel] = Params) -> dict:
    """The JSON schema (draft 2020-12) of ``model``, as a dict."""
    body = _clean(model.model_json_schema(mode="validation"))
    defs = body.pop("$defs", {})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "mmir params.yaml", **body, "$defs": defs}


def render(model: type[BaseModel] = Params) -> str:
    """The text of params.schema.yaml for ``model``."""
    return HEADER + yaml.safe_dump(generate(model), sort_keys=False, allow_unicode=True, width=130, default_flow_style=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mmir.config.schema", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {SCHEMA_PATH}")
    group.add_argument("--check", action="store_true", help="exit 1 when the committed schema is not the generated one")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
    elif args.check:
        if SCHEMA_PATH.read_text(encoding="utf-8") != text:
            print(f"{SCHEMA_PATH} is out of date: python -m mmir.config.schema --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
