"""Dicts to typed config objects: :func:`parse` (the shorthands ``parse_system``/``parse_dataset``/``parse_params`` live in
:mod:`mmir.config.models`, which this module never imports). A pydantic error becomes a
:class:`~mmir.core.errors.ConfigError` naming the user's dotted key (``systems.bm25.k1``), never pydantic's union tags."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from mmir.core.errors import ConfigError

T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def _adapter(model: Any) -> TypeAdapter:
    return TypeAdapter(model)


def _is_tag(part: object) -> bool:
    # union members are tagged "<key>=<value>" (mmir.config.models); config names cannot hold "="
    return isinstance(part, str) and "=" in part


def error_key(error: dict, data: Any, key: str = "") -> str:
    """The dotted key of one pydantic error on ``data``, under ``key``.

    The error's location also holds pydantic's labels of union members (``kind=bm25``, ``int``, ``literal['all']``):
    only the parts that are keys or indices of ``data`` stay, plus a last missing key (a required field), plus the
    discriminator or refused key the error names.
    """
    parts = [p for p in error["loc"] if not _is_tag(p) and p != "[key]"]
    kept: list[str] = []
    for i, part in enumerate(parts):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        elif isinstance(data, dict) and i == len(parts) - 1:
            pass  # a required key the user did not give
        else:
            continue  # a union member's label
        kept.append(str(part))
    if error["type"] == "refused_key":
        kept.append(str(error["ctx"]["key"]))
    elif error["type"].startswith("bad_tag:"):  # a discriminator (source, kind, backend) missing or unknown
        kept.append(error["type"].split(":", 1)[1])
    return ".".join([p for p in (key,) if p] + kept) or "<root>"


def error_message(error: dict) -> str:
    """The message of one pydantic error; the input is echoed only for values that cannot be a credential."""
    if error["type"] == "refused_key" or error["type"].startswith("bad_tag:"):
        return error["msg"]
    if error["type"] == "extra_forbidden":  # name the union member (``source: beir``) whose keys these are not
        member = [p.replace("=", ": ", 1) for p in error["loc"] if _is_tag(p)]
        return f"unknown key (not a setting of {member[-1]})" if member else "unknown key (not a setting here)"
    value = error.get("input")
    shown = f" (got {value!r})" if isinstance(value, int | float | bool) or (isinstance(value, str) and len(value) < 200) else ""
    return error["msg"] + (shown if error["type"] not in ("missing",) else "")


def parse(model: type[T] | Any, data: Any, key: str = "", file: str | None = None) -> T:
    """``data`` (a dict from YAML) as an instance of ``model`` (a model class or an annotated union).

    Raises:
        ConfigError: naming ``key`` + the dotted path of the first bad value.
    """
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return _adapter(model).validate_python(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        keys = [error_key(e, data, key) for e in errors]
        # a value no member of a union takes gives one error per member: name the deepest key, say all its messages
        where = max((k for k in keys if k == keys[0] or k.startswith(keys[0] + ".")), key=len)
        messages = dict.fromkeys(error_message(e) for e, k in zip(errors, keys) if k == where)
        raise ConfigError(where, "; or: ".join(messages), file) from None
