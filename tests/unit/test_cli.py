"""``mmir --configfile``: a list after one flag (as ``snakemake --configfile A B``), the flag repeated, before or after
the command; the overlays reach the config loader in the order given."""

from __future__ import annotations

import pytest

from mmir import cli


@pytest.fixture
def loaded(monkeypatch):
    """The (params, overlays) main() hands to the config loader; the command itself does nothing."""
    import mmir.workflow.validate as V

    seen = []
    monkeypatch.setattr(V, "load_config", lambda params, overlays: seen.append((params, list(overlays))) or {})
    monkeypatch.setattr(cli, "cmd_validate", lambda config, args: 0)
    monkeypatch.setattr(cli, "cmd_job", lambda config, args: seen.append(("job", args.rule, args.wildcards)) or 0)
    return seen


@pytest.mark.parametrize("argv", [
    ["--configfile", "a.yaml", "b.yaml", "validate"],                      # snakemake's form: a list after one flag
    ["--configfile", "a.yaml", "--configfile", "b.yaml", "validate"],      # the repeated form
    ["--configfile=a.yaml", "--configfile", "b.yaml", "validate"],
    ["validate", "--configfile", "a.yaml", "b.yaml"],                      # after the command
    ["--configfile", "a.yaml", "validate", "--configfile", "b.yaml"],      # both sides, order kept
])
def test_configfile_list_or_repeated(loaded, argv):
    assert cli.main(argv) == 0
    assert loaded == [("params.yaml", ["a.yaml", "b.yaml"])]


def test_configfile_list_before_run_keeps_the_rule_and_wildcards(loaded):
    assert cli.main(["--params", "p.yaml", "--configfile", "a.yaml", "b.yaml", "job", "retrieve", "task=task1"]) == 0
    assert loaded == [("p.yaml", ["a.yaml", "b.yaml"]), ("job", "retrieve", ["task=task1"])]


def test_no_configfile_and_a_flag_without_file(loaded, capsys):
    assert cli.main(["validate"]) == 0
    assert loaded == [("params.yaml", [])]
    with pytest.raises(SystemExit) as e:
        cli.main(["--configfile", "validate"])
    assert e.value.code == 2 and "required: cmd" in capsys.readouterr().err  # the command was not taken for a file


def test_a_missing_overlay_is_an_error_line_not_a_traceback(tmp_path, capsys):
    assert cli.main(["--params", str(tmp_path / "p.yaml"), "validate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmir: error:") and "p.yaml" in err and "Traceback" not in err


@pytest.mark.parametrize("rule, wildcards, expected", [
    ("rerank", ["domain=statistics", "system=bm25+rr:nope"], "rule rerank: system=bm25+rr:nope is not in this config"),
    ("retrieve", ["system=bm25"], "rule retrieve: wildcard or config key 'domain' missing"),
])
def test_run_with_a_wildcard_the_config_lacks_is_an_error_line_naming_it(rule, wildcards, expected, capsys):
    """params.yaml has no reranked system (rerank.yaml does) and every retrieve job has a domain."""
    assert cli.main(["job", rule, "task=task1", "dataset=openstax", *wildcards]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmir: error:") and expected in err and "Traceback" not in err
