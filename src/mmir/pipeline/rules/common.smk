# Validation and the bridge to the rule specs (mmir.workflow.rules, one module per rule file), shared by every
# rule file.
import re
import sys
from pathlib import Path

# the mmir this workflow ships in (a checkout's src/, or site-packages): its rules and its code are one version
_MMIR_ROOT = str(Path(workflow.current_basedir).parents[2])
if _MMIR_ROOT not in sys.path:
    sys.path.insert(0, _MMIR_ROOT)

from mmir.config import merge_config_files
from mmir.core import paths
from mmir.core.tasks import TASKS
from mmir.data.domains import dataset_domains
from mmir.workflow import rules as R
from mmir.workflow import units as U
from mmir.workflow.targets import all_targets
from mmir.workflow.units import ablation_systems, rerank_systems
from mmir.workflow.validate import validate_config

# Snakemake merges params.yaml into the --configfile overlays, so an overlay's systems and datasets would come first
# (and with them a table's first row). The config is rebuilt from Snakemake's own list of files with mmir's merge:
# `python -m mmir validate` reads the same files the same way, and both see one config, key order included.
_overlays = list(workflow.config_settings.configfiles)
CONFIG_FILES = [*([] if workflow.config_settings.replace_workflow_config else workflow.configfiles[len(_overlays) :]), *_overlays]
_raw = merge_config_files(CONFIG_FILES, workflow.config_settings.config)
config.clear()
config.update(_raw)
# raises ConfigError naming the bad key; no job has started
validate_config(
    config,
    " + ".join(map(str, CONFIG_FILES)) + (" + --config" if workflow.config_settings.config else "") or "config",
)

# "<system>+cap:<captioner>", "<system>+ref:<reformulator>"
DERIVED = ablation_systems(config)
# "<system>+rr:<reranker>": made by the rerank rule, never by retrieve (each rule's system wildcard matches only its own)
RERANKED = rerank_systems(config)


def alternation(names):
    """A wildcard constraint matching exactly ``names`` (longest first); never matches when empty."""
    return "|".join(map(re.escape, sorted(names, key=len, reverse=True))) or "(?!)"


FIRST_STAGE = alternation([*config["systems"], *DERIVED])
DOMAINS = {name: dataset_domains(name, ds) for name, ds in config["datasets"].items()}


# ---- inputs, outputs and the config slice of each rule (the specs in mmir.workflow.rules) ----


def spec_input(name):
    """The rule's input function (named inputs, lists allowed). Every rule after prepare reads the unit lists only
    once the prepare jobs of datasets that may have unscorable domains have run (mmir.workflow.units.unscorable)."""

    def inputs(w):
        token = U.PREPARED_GATE.set(None if name in ("fetch", "prepare") else await_prepared)
        try:
            return R.RULES[name].input(config, dict(w.items()))
        finally:
            U.PREPARED_GATE.reset(token)

    return inputs


def await_prepared(dataset, domain):
    """Raise Snakemake's incomplete-checkpoint signal until the domain's prepare job has run."""
    checkpoints.prepare.get(dataset=dataset, domain=domain)


def spec_params(name):
    """The config slice the rule's step reads: its only param, so a change reruns exactly the jobs it touches (plus,
    for an LLM stage, ``retry``: a job whose last run had failed calls reruns)."""
    return lambda w: R.RULES[name].slice(config, dict(w.items()))


def spec_output(name):
    """The rule's named outputs (directories marked as such; config-dependent ones included)."""
    r = R.RULES[name]
    return {k: directory(v) if k in r.directories else v for k, v in r.output_patterns(config).items()}


def system_kind(w):
    return R.system_config(config, w.system)["kind"]


def spec_threads(name):
    """The rule's threads from config (``resources.<rule>``, a system's own ``resources``)."""
    return lambda w: R.job_resources(config, name, getattr(w, "system", None))["threads"]


def spec_resources(name):
    """The rule's ``mem_mb``, ``runtime`` (minutes) and ``gpu`` from config, for local runs and cluster profiles."""
    return {k: (lambda w, k=k: R.job_resources(config, name, getattr(w, "system", None))[k]) for k in ("mem_mb", "runtime", "gpu")}
