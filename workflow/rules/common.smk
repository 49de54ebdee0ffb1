# Validation, targets and helpers shared by every rule file.
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # run from a checkout without installing

from mmir import paths
from mmir.config import config_slice, dataset_domains, validate_config
from mmir.data.parquet import domain_files

validate_config(config, "params.yaml")  # raises ConfigError naming the bad key; no job has started

DOMAINS = {name: dataset_domains(name, ds) for name, ds in config["datasets"].items()}
UNITS = [(ds, dom) for ds, doms in DOMAINS.items() for dom in doms]


wildcard_constraints:
    dataset="|".join(map(re.escape, config["datasets"])) if config["datasets"] else "x",
    system="|".join(map(re.escape, config["systems"])),
    task="task[1-4]",
    domain=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


def all_units(task):
    """(dataset, domain, system) triples of a task."""
    return [dict(dataset=d, domain=m, system=s) for d, m in UNITS for s in config["systems"]]


def dense(system):
    return config["systems"][system]["kind"] == "dense"
