"""Config checks of the MM-BRIGHT generative ablations (captioners, reformulators, grids)."""

from __future__ import annotations

from mmir.core.errors import ConfigError


def check(config: dict, file: str | None = None) -> None:
    """Cross-references of captioners, reformulators and the ablation grids.

    Raises:
        ConfigError: naming ``captioners.<c>.generator``, ``reformulators.<r>.<key>`` or ``ablations.<grid>.<key>.<i>``.
    """
    gens, caps, refs = config["generators"], config["captioners"], config["reformulators"]
    for name, c in caps.items():
        if c["kind"] == "vlm" and c["generator"] not in gens:
            raise ConfigError(f"captioners.{name}.generator", f"{c['generator']!r} is not a key of generators", file)
    for name, r in refs.items():
        if r["generator"] not in gens:
            raise ConfigError(f"reformulators.{name}.generator", f"{r['generator']!r} is not a key of generators", file)
        if r["image_text"] not in caps:
            raise ConfigError(f"reformulators.{name}.image_text", f"{r['image_text']!r} is not a key of captioners", file)
    for grid, key, pool in (("caption", "captioners", caps), ("reformulation", "reformulators", refs)):
        ab = config["ablations"][grid]
        for i, s in enumerate(ab["systems"]):
            if s not in config["systems"] or config["systems"][s]["kind"] == "mm":
                raise ConfigError(f"ablations.{grid}.systems.{i}", f"{s!r} is not a bm25/dense system of systems", file)
        for i, v in enumerate(ab[key]):
            if v not in pool:
                raise ConfigError(f"ablations.{grid}.{key}.{i}", f"{v!r} is not a key of {key}", file)
