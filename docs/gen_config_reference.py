"""The configuration reference page, generated from the pydantic config models (never written by hand).

``render(model)`` walks a pydantic v2 model's fields (``model_fields``: annotation, default, description) and
returns markdown: one table per top-level section, one row per dotted key with its type, default and the first
line of its description. Nested models are walked in place; ``dict[str, M]`` keys appear as ``<name>``, list
items as ``<i>``, and each variant of a union of models (datasets by ``source``, systems by ``kind``) gets its
rows labelled with the variant's class name. ``docs/hooks.py`` calls it at every ``mkdocs build``, so the page
cannot drift from the models; ``python docs/gen_config_reference.py`` prints it.
"""

from __future__ import annotations

import enum
import importlib.util
import json
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT_MODEL = "mmir.config.models:Params"


@dataclass(frozen=True)
class Row:
    """One documented key: ``key`` dotted (``systems.<name>.k1``), ``variant`` the model class that defines it."""

    key: str
    type: str
    default: str
    description: str
    variant: str = ""


def _strip(annotation: object) -> object:
    """The annotation without ``Annotated[...]`` metadata."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_union(origin: object) -> bool:
    return origin is typing.Union or origin is types.UnionType


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def type_name(annotation: object) -> str:
    """A short readable type: ``int``, ``list[str]``, ``'a' | 'b'``, ``BM25System | DenseSystem``, ``float | None``."""
    annotation = _strip(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) if isinstance(a, str) else repr(a) for a in args)
    if _is_union(origin):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return " | ".join(json.dumps(m.value) for m in annotation)
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def default_text(field) -> str:
    """The field's default as YAML-like text; ``required`` when it has none."""
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "null"
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def _nested(annotation: object, key: str) -> list[tuple[str, type[BaseModel]]]:
    """The models reachable under a field: ``(dotted prefix, model)`` pairs (dict values, list items, union members)."""
    annotation = _strip(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if _is_model(annotation):
        return [(key, annotation)]
    if _is_union(origin):
        return [pair for a in args for pair in _nested(a, key)]
    if origin in (dict, typing.Mapping) or (isinstance(origin, type) and issubclass(origin, dict)):
        return _nested(args[1], f"{key}.<name>") if len(args) == 2 else []
    if origin in (list, tuple, set, frozenset, typing.Sequence):
        return [pair for a in args if a is not Ellipsis for pair in _nested(a, f"{key}.<i>")]
    return []


def field_rows(model: type[BaseModel], prefix: str = "", variant: str = "", _seen: tuple = ()) -> list[Row]:
    """Every key of ``model`` and of the models under it, depth first, in declaration order."""
    rows: list[Row] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        rows.append(Row(key, type_name(field.annotation), default_text(field), _first_line(field.description), variant))
        nested = [(k, m) for k, m in _nested(field.annotation, key) if m not in _seen]  # recursion: documented once
        if len({m for _, m in nested}) <= 1:
            for sub_key, sub in nested:
                rows.extend(field_rows(sub, f"{sub_key}.", variant, (*_seen, model, sub)))
            continue
        # variants (datasets by source, systems by kind): a key every variant defines alike is one row; the others
        # name the variants that define them
        merged: dict[tuple, list[str]] = {}
        for sub_key, sub in nested:
            for r in field_rows(sub, f"{sub_key}.", "", (*_seen, model, sub)):
                merged.setdefault((r.key, r.type, r.default, r.description), []).append(r.variant or sub.__name__)
        everyone = {sub.__name__ for _, sub in nested}
        for (k, t, d, desc), names in merged.items():
            label = variant if set(names) >= everyone else ", ".join(dict.fromkeys(names))
            rows.append(Row(k, t, d, desc, label))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _prose(text: str) -> str:
    """A description as a table cell: ``<rule>`` outside code spans escaped, so markdown does not read it as HTML."""
    parts = text.split("`")
    return _cell("`".join(p if i % 2 else p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts)))


def render(model: type[BaseModel], title: str = "Configuration reference") -> str:
    """The markdown page: an introduction, then one table per top-level field of ``model``."""
    out = [
        f"# {title}",
        "",
        f"Generated from `{model.__module__}.{model.__qualname__}` by `docs/gen_config_reference.py` at every docs build:",
        "each key of `params.yaml` with its type, default and the one line of documentation its model gives it.",
        "`<name>` stands for a name you choose (a dataset, a system), `<i>` for a list position; where a section",
        "has variants (datasets by `source`, systems by `kind`), the *variant* column names the model that defines",
        "the key. See [Configuration](configuration.md) for how the config is read, merged and validated.",
        "",
    ]
    rows = field_rows(model)
    sections = [(f.alias or n) for n, f in model.model_fields.items()]
    for section in sections:
        mine = [r for r in rows if r.key == section or r.key.startswith(section + ".")]
        out += [f"## `{section}`", ""]
        head = mine[0]
        if head.description:
            out += [_prose(head.description), ""]
        with_variant = any(r.variant for r in mine)
        out.append("| key | type | default | description |" + (" variant |" if with_variant else ""))
        out.append("|---|---|---|---|" + ("---|" if with_variant else ""))
        for r in mine:
            # the type as plain text: Python-Markdown keeps the backslash of an escaped pipe inside a code span
            cells = [f"`{r.key}`", _prose(r.type), f"`{_cell(r.default)}`", _prose(r.description)]
            if with_variant:
                cells.append(f"`{r.variant}`" if r.variant else "")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def root_model() -> type[BaseModel]:
    """``mmir.config.models.Params`` (from this checkout's ``src/`` when ``mmir`` is not installed)."""
    if importlib.util.find_spec("mmir") is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    module, _, name = ROOT_MODEL.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


if __name__ == "__main__":
    print(render(root_model()))
