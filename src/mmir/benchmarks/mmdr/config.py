"""One configuration object for the whole MMDR evaluator (:class:`MMDRConfig`), buildable from params.yaml."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mmir.benchmarks.mmdr.aggregate import MMDR_WEIGHTS, parse_weights
from mmir.benchmarks.mmdr.controller import ControllerConfig
from mmir.benchmarks.mmdr.fetch import FetchConfig
from mmir.benchmarks.mmdr.flae import FLAEConfig
from mmir.benchmarks.mmdr.mm_engines import EngineConfig
from mmir.benchmarks.mmdr.mosaic import MosaicConfig
from mmir.benchmarks.mmdr.trace import TraceConfig
from mmir.benchmarks.mmdr.vef import VEFConfig
from mmir.core.errors import ConfigError


@dataclass(frozen=True)
class MMDRConfig:
    """Evaluator settings (spec §3 defaults): ``weights`` (GEN, EVI, MM, VEF) = (2, 3, 3, 2), ``gate`` ``"evi"`` or ``"trace"``."""

    min_report_chars: int = 1000
    weights: tuple[float, float, float, float] = MMDR_WEIGHTS
    gate: str = "evi"
    flae: FLAEConfig = field(default_factory=FLAEConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    vef: VEFConfig = field(default_factory=VEFConfig)
    mosaic: MosaicConfig = field(default_factory=MosaicConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)

    def __post_init__(self) -> None:
        if self.gate not in ("evi", "trace"):
            raise ValueError(f"gate must be 'evi' or 'trace', got {self.gate!r}")
        if len(self.weights) != 4:
            raise ValueError(f"weights need 4 entries (GEN, EVI, MM, VEF), got {self.weights!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, prefix: str = "mmdr") -> MMDRConfig:
        """Build from nested dicts (``weights`` a list or a ``"2,3,3,2"`` string).

        Raises:
            ConfigError: unknown key or invalid value (``key`` is the dotted path under ``prefix``).
        """
        data = dict(data or {})
        if isinstance(data.get("weights"), str):
            try:
                data["weights"] = parse_weights(data["weights"])
            except ValueError as e:
                raise ConfigError(f"{prefix}.weights", str(e)) from e
        return _build(cls, data, prefix)


_NESTED = {FLAEConfig, TraceConfig, FetchConfig, VEFConfig, MosaicConfig, ControllerConfig, EngineConfig, MMDRConfig}


def _build(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(prefix, f"expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}", f"unknown setting; accepted: {', '.join(sorted(fields))}")
    kw: dict[str, Any] = {}
    for name, value in data.items():
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if type(default) in _NESTED:
            kw[name] = _build(type(default), value, f"{prefix}.{name}")
        elif isinstance(default, tuple) and isinstance(value, list):
            kw[name] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        else:
            kw[name] = value
    try:
        return cls(**kw)
    except (TypeError, ValueError) as e:
        raise ConfigError(prefix, str(e)) from e
