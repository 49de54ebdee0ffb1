"""What every Python plug-in entry has (``backend: plugin``): the factory that builds the plug-in and the options it is
called with. The system and reranker classes that use it live beside their siblings (``systems.py``, ``rerank.py``);
how a plug-in is found, identified and checked: :mod:`mmir.encoders.plugins` (docs: Your own system)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from mmir.config.models.base import Section

#: the entry-point group an installed distribution names its plug-ins in
PLUGIN_GROUP = "mmir.plugins"
#: ``package.module:function`` (a dotted attribute after the colon, e.g. ``Class.create``), or an entry-point name
FACTORY_PATTERN = r"^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|[A-Za-z0-9][A-Za-z0-9_.+-]*)$"


class PluginFields(Section):
    """``backend: plugin`` with its ``factory`` and ``options`` (mixed into the plug-in system and reranker classes)."""

    backend: Literal["plugin"] = Field(description="plugin = a Python plug-in built by `factory` (docs: Your own system)")
    factory: str = Field(json_schema_extra={"pattern": FACTORY_PATTERN},
                         description="'package.module:function' returning the plug-in, or the name of an entry point in the "
                         "group mmir.plugins of an installed distribution; the distribution's name and version (a module "
                         "outside any distribution: its source file's sha256) are part of the cache key and the lineage")
    options: dict[str, Any] = Field({}, description="keyword arguments of the factory call (JSON-like values); part of the "
                                    "cache key")

    @field_validator("factory")
    @classmethod
    def _factory(cls, value: str) -> str:
        if not re.match(FACTORY_PATTERN, value):
            raise ValueError(f"{value!r} is neither 'package.module:function' nor the name of an entry point (group {PLUGIN_GROUP})")
        return value

    @property
    def model(self) -> str:
        """The factory: what other systems name as their ``model`` (lineage, MLflow tags)."""
        return self.factory
