"""The base of every config model: unknown keys are errors, instances are frozen, and a field without a default
in params.yaml's sense (``unset``) is left out of the filled dict when the user did not give it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StringConstraints,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from mmir.core.tasks import TASKS, TaskSpec

#: the key names a mapping section accepts (datasets, captioners, generators, reformulators, domains)
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
#: system names also take ``+`` and ``:`` (ablation systems are ``<system>+cap:<captioner>``)
SystemName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+:-]*$")]


@dataclass(frozen=True)
class Registered:
    """A task name of :data:`mmir.core.tasks.TASKS` (tasks with a table) that ``which`` accepts, read at validation
    and schema time, so a task added to the registry (or by a test) is a valid name with no edit here."""

    which: Callable[[TaskSpec], bool] = lambda spec: True

    def names(self) -> list[str]:
        return [n for n, spec in TASKS.items() if spec.table and self.which(spec)]

    def _check(self, name: str) -> str:
        if name not in self.names():
            raise PydanticCustomError("task", "unknown task: one of {names}", {"names": self.names()})
        return name

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict:
        return {**handler(schema), "enum": self.names()}


#: a task of the registry (config ``tasks``, ``systems.<name>.tasks``, a stage's ``task``)
TaskName = Annotated[str, Registered()]
#: a task with query images (the essentiality stage's)
MultimodalTask = Annotated[str, Registered(lambda spec: spec.multimodal)]
#: a task that ranks corpus documents (M2RAG's knowledge bases)
DocumentTask = Annotated[str, Registered(lambda spec: spec.ranks == "documents")]
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


@functools.cache
def partial(model: type[BaseModel]) -> type[Section]:
    """``model`` with every field optional: a job's params slice that keeps only the keys its step reads (the slice
    is already validated and filled; a key left out is ``None`` and never read)."""
    return create_model(f"Partial{model.__name__}", __base__=Section, __doc__=f"Some keys of {model.__name__}.",
                        **{name: (field.annotation | None, None) for name, field in model.model_fields.items()})


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


def tagged_by(key: str, *values: str) -> Discriminator:
    """The discriminator of a union whose members are tagged ``"<key>=<value>"``: an unknown or missing ``key`` is a
    ``bad_tag:<key>`` error listing ``values`` (:func:`mmir.config.parse.error_key` names the key)."""

    def tag(d: object) -> str | None:
        value = d.get(key) if isinstance(d, dict) else getattr(d, key, None)
        return f"{key}={value}" if value in values else None

    return Discriminator(tag, custom_error_type=f"bad_tag:{key}", custom_error_message=f"{key} must be one of: {', '.join(values)}")
