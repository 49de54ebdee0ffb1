"""The base of every config model: unknown keys are errors, instances are frozen, and a field without a default
in params.yaml's sense (``unset``) is left out of the filled dict when the user did not give it."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

#: the key names a mapping section accepts (datasets, captioners, generators, reformulators, domains)
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
#: system names also take ``+`` and ``:`` (ablation systems are ``<system>+cap:<captioner>``)
SystemName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+:-]*$")]
#: a number kept as written (an int stays an int, so the filled config prints as params.yaml does)
Number = int | float

#: a key refused everywhere, with the reason (its value is never echoed: it may be a credential)
NO_KEYS = {"api_key": "never put a key in params.yaml: use api_key_env"}


class Section(BaseModel):
    """A config section or entry: ``extra="forbid"``, frozen."""

    # strict: no coercion ("1" is not a number, "yes" not a boolean), as the JSON schema has it
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    #: keys this model refuses with a reason (e.g. a setting of another backend), besides :data:`NO_KEYS`
    refused: ClassVar[dict[str, str]] = {}
    #: None: :func:`fill` writes every field; else only the fields given and these (constants that would flood the
    #: filled config, and the MLflow params made from it, stay in the typed object)
    filled: ClassVar[frozenset[str] | None] = None

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                reason = NO_KEYS.get(key) or cls.refused.get(key)
                if reason:  # ctx["key"] completes the error's location (mmir.config.parse)
                    raise PydanticCustomError("refused_key", reason, {"key": key})
        return data


def default_of(model: type[BaseModel], field: str) -> Any:
    """The default of ``model.field``: for a library function's keyword default that must equal the config's."""
    return model.model_fields[field].get_default(call_default_factory=True)


def unset(description: str, **kw: Any) -> Any:
    """A field with no default in params.yaml: ``None`` when not given, and then left out of the filled dict."""
    return Field(None, description=description, json_schema_extra={"x-unset": True}, **kw)


def fill(model: BaseModel) -> Any:
    """``model`` as the JSON-like dict :func:`mmir.config.validate_config` returns: every default written, except
    ``unset`` fields the user did not give."""
    out = {}
    only = getattr(model, "filled", None)
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if value is None and extra.get("x-unset") and name not in model.model_fields_set:
            continue
        if only is not None and name not in only and name not in model.model_fields_set:
            continue
        out[name] = _fill_value(value)
    return out


def _fill_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return fill(value)
    if isinstance(value, dict):
        return {k: _fill_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_fill_value(v) for v in value]
    return value
