"""Config checks of the MM-BRIGHT generative ablations (captioners, reformulators, grids), the essentiality stage and the
quality audit."""

from __future__ import annotations

from mmir.config.models import Params
from mmir.core.errors import ConfigError


def check(params: Params, file: str | None = None) -> None:
    """Cross-references of captioners, reformulators and the ablation grids.

    Raises:
        ConfigError: naming ``captioners.<c>.generator``, ``reformulators.<r>.<key>`` or ``ablations.<grid>.<key>.<i>``.
    """
    gens, caps, refs = params.generators, params.captioners, params.reformulators
    for name, c in caps.items():
        if c.kind == "vlm" and c.generator not in gens:
            raise ConfigError(f"captioners.{name}.generator", f"{c.generator!r} is not a key of generators", file)
    for name, r in refs.items():
        if r.generator not in gens:
            raise ConfigError(f"reformulators.{name}.generator", f"{r.generator!r} is not a key of generators", file)
        if r.image_text not in caps:
            raise ConfigError(f"reformulators.{name}.image_text", f"{r.image_text!r} is not a key of captioners", file)
    for grid, key, pool in (("caption", "captioners", caps), ("reformulation", "reformulators", refs)):
        ab = getattr(params.ablations, grid)
        for i, s in enumerate(ab.systems):
            if s not in params.systems or params.systems[s].kind == "mm":
                raise ConfigError(f"ablations.{grid}.systems.{i}", f"{s!r} is not a bm25/dense system of systems", file)
        for i, v in enumerate(getattr(ab, key)):
            if v not in pool:
                raise ConfigError(f"ablations.{grid}.{key}.{i}", f"{v!r} is not a key of {key}", file)
    check_essentiality(params, file)
    check_audit(params, file)


def check_essentiality(params: Params, file: str | None = None) -> None:
    """Cross-references of the ``essentiality`` section (MM-BRIGHT §3.4): a classifier among the generators unless a
    labels file is given (which must exist and be .csv/.tsv/.parquet), ``task`` in ``tasks``, datasets and systems
    that exist, prompt files that exist.

    Raises:
        ConfigError: naming ``essentiality.<key>`` (``essentiality.systems.<i>`` for an unknown system).
    """
    from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
    from mmir.config import check_references
    from mmir.core.paths import resolve_path

    e = params.essentiality
    if e is None:
        return
    if e.task not in params.tasks:
        raise ConfigError("essentiality.task", f"{e.task!r} is not in tasks (its per-query scores are broken down; "
                          "add it, or switch the stage off with essentiality: null)", file)
    if e.labels:
        path = resolve_path(e.labels)
        if not path.is_file():
            raise ConfigError("essentiality.labels", f"labels file {e.labels!r} not found ({path})", file)
        if path.suffix not in (".csv", ".tsv", ".parquet"):
            raise ConfigError("essentiality.labels", f"{e.labels!r}: a labels file is .csv, .tsv or .parquet", file)
    elif e.classifier is None:
        raise ConfigError("essentiality.classifier", "set a key of generators, or a labels file (essentiality.labels), "
                          "or switch the stage off with essentiality: null", file)
    else:
        check_references(params, "essentiality", file, classifier="generators")
    for i, d in enumerate(e.datasets or []):
        if d not in params.datasets:
            raise ConfigError(f"essentiality.datasets.{i}", f"{d!r} is not a key of datasets", file)
    for i, s in enumerate(e.systems or []):
        if s not in params.systems:
            raise ConfigError(f"essentiality.systems.{i}", f"{s!r} is not a key of systems", file)
    for key in ("prompt", "type_prompt"):
        try:
            MMBRIGHT_PROMPTS.get(getattr(e, key))
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigError(f"essentiality.{key}", str(exc), file) from exc


def check_audit(params: Params, file: str | None = None) -> None:
    """Cross-references of the ``audit`` section (MM-BRIGHT §3 quality audit): a judge among the generators, datasets
    that exist, a prompt file that exists.

    Raises:
        ConfigError: naming ``audit.<key>`` (``audit.datasets.<i>`` for an unknown dataset).
    """
    from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
    from mmir.config import check_references

    a = params.audit
    if a is None or not a.enabled:
        return
    check_references(params, "audit", file, judge="generators")
    try:
        MMBRIGHT_PROMPTS.get(a.prompt)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError("audit.prompt", str(exc), file) from exc
