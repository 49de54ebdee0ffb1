"""Every shell command shown in README.md and docs/**/*.md exists, so a renamed command, flag, stage, profile or
config key fails here, naming the file, the line and the command.

What is checked, in the fenced ``bash``/``sh``/``shell``/``console`` blocks (comments and heredoc bodies skipped):
``python -m mmir …`` / ``mmir …`` against the argparse parser of :mod:`mmir.cli` (and the stage family of
``targets``/``snakemake``, the rule of ``job``); ``make <target>`` against the Makefile; ``snakemake … --profile <p>``
and ``mmir run … --profile <p>`` against the package's profiles (``src/mmir/pipeline/profiles/``) and
``--configfile <f>`` paths inside the project against the files; ``dvc repro
<stage>`` against dvc.yaml's stages with ``foreach`` expanded over params.yaml (what ``dvc stage list`` prints);
``dvc exp run -S <key>=<value>`` against the config models (the JSON schema until they exist). The module-size table
of docs/architecture.md is checked against ``src/mmir`` too. The configuration reference generator
(docs/gen_config_reference.py) is tested on a small model of its own. ``python <script>.py`` commands name a script
of the project that exists.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import re
import shlex
import shutil
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mmir.core.paths import PIPELINE

PROJECT = Path(__file__).resolve().parents[2]
DOC_FILES = [PROJECT / "README.md", *sorted((PROJECT / "docs").rglob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console", "shell-session"}
PYTHONS = {"python", "python3", ".venv/bin/python", "$(PY)"}


# --- reading the commands -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One simple command of a code block: ``path:line`` of its first line, its text and its words."""

    path: Path
    line: int
    text: str
    words: tuple[str, ...]

    def where(self) -> str:
        rel = self.path.relative_to(PROJECT) if self.path.is_relative_to(PROJECT) else self.path
        return f"{rel}:{self.line}: `{self.text}`"


def shell_blocks(text: str) -> typing.Iterator[tuple[int, list[str]]]:
    """``(first line number, lines)`` of each fenced shell block of a markdown text."""
    fence, lang, start, body = None, "", 0, []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if fence is None:
            m = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if m:
                fence, lang, start, body = m.group(1), m.group(2).lower(), number + 1, []
        elif stripped.startswith(fence):
            if lang in SHELL_LANGS:
                yield start, body
            fence = None
        else:
            body.append(line)


def commands(path: Path) -> list[Command]:
    """The simple commands of every shell block in ``path``: continuations joined, heredocs, comments and prompts
    dropped, pipelines and lists (``|``, ``&&``, ``||``, ``;``) split."""
    out: list[Command] = []
    for start, lines in shell_blocks(path.read_text(encoding="utf-8")):
        i, heredoc = 0, None
        while i < len(lines):
            number, line = start + i, lines[i]
            i += 1
            if heredoc is not None:
                heredoc = None if line.strip() == heredoc else heredoc
                continue
            while line.rstrip().endswith("\\") and i < len(lines):
                line, i = line.rstrip()[:-1] + " " + lines[i], i + 1
            m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
            if m:
                heredoc = m.group(1)
            line = re.sub(r"^\s*\$\s+", "", line)  # a prompt
            line = re.sub(r"(^|\s)\d*(>>?|<<?-?|&>)(&\d+|\s*\S+)", " ", line)  # redirections (not prepare@<dataset>)
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split, lexer.commenters = True, "#"
            try:
                words = list(lexer)
            except ValueError as exc:
                raise AssertionError(f"{path}:{number}: cannot read the command: {exc}") from exc
            current: list[str] = []
            for word in [*words, ";"]:
                if word and set(word) <= set(";&|"):
                    if current:
                        out.append(Command(path, number, " ".join(current), tuple(current)))
                    current = []
                else:
                    current.append(word)
    return out


# --- what exists ----------------------------------------------------------------------------------------------------


def mmir_parser() -> argparse.ArgumentParser:
    """The parser ``mmir.cli`` builds (its ``build_parser()`` if it has one, else the one ``main`` parses with)."""
    from mmir import cli

    if hasattr(cli, "build_parser"):
        return cli.build_parser()

    class Captured(Exception):
        pass

    def capture(self, *args, **kwargs):
        raise Captured(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", capture)
        mp.setattr(argparse.ArgumentParser, "parse_known_args", capture)
        try:
            cli.main(["validate"])
        except Captured as got:
            return got.args[0]
    raise AssertionError("mmir.cli.main did not parse its arguments with argparse")


def make_targets(makefile: Path = PROJECT / "Makefile") -> set[str]:
    targets = set()
    for line in makefile.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_./$()-][^:=#]*?)\s*::?(?!=)", line)
        if m and not line.startswith(("\t", ".PHONY")):
            targets.update(m.group(1).split())
    return targets


def dvc_stages(dvc_file: Path = PROJECT / "dvc.yaml", params_file: Path = PROJECT / "params.yaml") -> set[str]:
    """Stage names as ``dvc stage list`` gives them: ``name``, or ``name@key`` for each item of a ``foreach``."""
    stages = yaml.safe_load(dvc_file.read_text())["stages"]
    params = yaml.safe_load(params_file.read_text())
    names = set()
    for name, stage in stages.items():
        if "foreach" not in stage:
            names.add(name)
            continue
        over = stage["foreach"]
        if isinstance(over, str):
            m = re.fullmatch(r"\$\{\s*([\w.]+)\s*\}", over)
            over = params
            for part in m.group(1).split(".") if m else []:
                over = over[part]
        names.update(f"{name}@{key}" for key in (over if isinstance(over, (dict, list)) else []))
    return names


def rule_names() -> set[str]:
    text = "\n".join(p.read_text() for p in [PIPELINE / "Snakefile", *(PIPELINE / "rules").glob("*.smk")])
    return set(re.findall(r"^\s*rule\s+(\w+)\s*:", text, re.M))


def stage_families() -> set[str]:
    from mmir.workflow import targets

    return set(targets.FAMILIES)


def _strip(annotation):
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def model_has_key(annotation, parts: list[str]) -> bool:
    """Whether a dotted key (split) reaches a field under a pydantic annotation: names of ``dict`` sections match
    any name, list positions any integer, a union any member."""
    from pydantic import BaseModel

    if not parts:
        return True
    annotation = _strip(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if parts[0] in (name, field.alias):
                return model_has_key(field.annotation, parts[1:])
        return False
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        return any(model_has_key(a, parts) for a in args)
    if origin is dict or (isinstance(origin, type) and issubclass(origin, dict)):
        return len(args) == 2 and model_has_key(args[1], parts[1:])
    if origin in (list, tuple):
        return parts[0].isdigit() and any(model_has_key(a, parts[1:]) for a in args if a is not Ellipsis)
    return annotation is typing.Any


def schema_has_key(schema: dict, parts: list[str], root: dict | None = None) -> bool:
    """The same walk over the JSON schema (``properties``, ``additionalProperties``, ``$ref``, ``oneOf``, ``if/then``)."""
    root = root or schema
    if not parts:
        return True
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return schema_has_key(target, parts, root)
    for combo in ("oneOf", "anyOf", "allOf"):
        if any(schema_has_key(s, parts, root) for s in schema.get(combo, [])):
            return True
    if any(schema_has_key(schema[branch], parts, root) for branch in ("then", "else") if branch in schema):
        return True
    if parts[0] in schema.get("properties", {}):
        return schema_has_key(schema["properties"][parts[0]], parts[1:], root)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return schema_has_key(extra, parts[1:], root)
    if "items" in schema and parts[0].isdigit():
        return schema_has_key(schema["items"], parts[1:], root)
    return False


def config_has_key(key: str) -> bool:
    parts = key.split(".")
    try:
        from mmir.config.models import Params
    except ImportError:  # before the typed config exists: the schema it replaces
        schema = yaml.safe_load((PIPELINE / "schemas" / "params.schema.yaml").read_text())
        return schema_has_key(schema, parts)
    return model_has_key(Params, parts)


# --- the checks -----------------------------------------------------------------------------------------------------


def _after(words: tuple[str, ...], program: str) -> list[str] | None:
    """The words after ``program`` (a bare name or a path ending in it), or None when the command is not it."""
    for i, word in enumerate(words):
        if re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", word) or word in ("sudo", "nice", "time", "exec"):
            continue  # environment assignments and wrappers before the program
        if program == "mmir":
            if word in PYTHONS or word.endswith("/python"):
                rest = list(words[i + 1:])
                return rest[2:] if rest[:2] == ["-m", "mmir"] else None
        return list(words[i + 1:]) if word == program or word.endswith("/" + program) else None
    return None


def check_mmir(args: list[str], parser: argparse.ArgumentParser) -> str | None:
    if "--" in args:
        args = args[: args.index("--")]
    from mmir import cli

    args, _ = cli.hoist_configfiles(args)  # what main() does first: a command name ends a --configfile list
    at = cli._command_at(args)
    if at is not None and args[at] == "run":  # mmir run's arguments are Snakemake's
        args, rest = args[: at + 1], args[at + 1:]
        return check_mmir(args[:at] + ["validate"], parser) or check_snakemake(rest)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            ns = parser.parse_args(args)
    except SystemExit as exc:
        return None if exc.code == 0 else err.getvalue().strip().splitlines()[-1]
    if ns.cmd in ("targets", "snakemake") and ns.family not in stage_families():
        return f"unknown stage family {ns.family!r} (mmir.workflow.targets.FAMILIES: {', '.join(sorted(stage_families()))})"
    if ns.cmd == "job" and not ns.rule.startswith("<") and ns.rule not in rule_names():
        return f"no rule {ns.rule!r} in the packaged Snakefile or its rules/*.smk"
    return None


def check_make(args: list[str]) -> str | None:
    known = make_targets()
    missing = [a for a in args if not a.startswith("-") and "=" not in a and a not in known]
    return f"no Makefile target {', '.join(missing)} (targets: {', '.join(sorted(known))})" if missing else None


def _repo_path(word: str) -> Path | None:
    """A relative path inside the project (its first component exists here), else None (a user's own file)."""
    if word.startswith(("/", "~", "$")) or "<" in word:
        return None
    path = PROJECT / word
    return path if (PROJECT / Path(word).parts[0]).exists() and len(Path(word).parts) > 1 else None


def check_snakemake(args: list[str]) -> str | None:
    problems = []
    for i, word in enumerate(args):
        if word == "--profile" or word.startswith("--profile="):
            profile = word.split("=", 1)[1] if "=" in word else (args[i + 1] if i + 1 < len(args) else "")
            if not (PROJECT / profile).is_dir() and not (PIPELINE / "profiles" / profile).is_dir():
                problems.append(f"no profile directory {profile!r}")
        if word == "--configfile" or word.startswith("--configfile="):
            files = [word.split("=", 1)[1]] if "=" in word else []
            for nxt in [] if files else args[i + 1:]:
                if nxt.startswith("-"):
                    break
                files.append(nxt)
            for f in files:
                path = _repo_path(f)
                if path is not None and not path.is_file():
                    problems.append(f"no config file {f!r}")
    return "; ".join(problems) or None


def check_dvc(args: list[str]) -> str | None:
    if args[:1] == ["repro"]:
        stages = dvc_stages()
        missing = []
        for target in (a for a in args[1:] if not a.startswith("-")):
            name = target.split(":", 1)[1] if ":" in target else target
            if "<" in name:  # prepare@<dataset>: a placeholder for any key of the foreach
                if not any(s.startswith(name.split("<", 1)[0]) for s in stages):
                    missing.append(target)
            elif name not in stages:
                missing.append(target)
        return f"no DVC stage {', '.join(missing)} (dvc stage list: {', '.join(sorted(stages))})" if missing else None
    if args[:2] == ["exp", "run"]:
        keys = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-S", "--set-param")]
        keys += [a.split("=", 1)[1] for a in args if a.startswith("--set-param=")]
        # DVC's Hydra syntax: +key adds a key the file lacks, ++key adds or overrides, ~key removes
        bad = [k.split("=", 1)[0] for k in keys if not config_has_key(k.split("=", 1)[0].split(":")[-1].lstrip("+~"))]
        return f"no config key {', '.join(bad)}" if bad else None
    return None


def _script(words: tuple[str, ...]) -> Path | None:
    """The project script a ``python <path>.py`` / ``bash <path>.sh`` command runs (None for any other command)."""
    runners = PYTHONS | {"bash", "sh"}
    if len(words) >= 2 and (words[0] in runners or words[0].endswith("/python")) and words[1].endswith((".py", ".sh")):
        return _repo_path(words[1])
    return None


def problems_in(path: Path) -> list[str]:
    """``path:line: `command`: what does not exist`` for each command of ``path`` that names something missing."""
    parser = None
    out = []
    for cmd in commands(path):
        problem = None
        if (args := _after(cmd.words, "mmir")) is not None:
            parser = parser or mmir_parser()
            problem = check_mmir(args, parser)
        elif (args := _after(cmd.words, "make")) is not None:
            problem = check_make(args)
        elif (args := _after(cmd.words, "snakemake")) is not None:
            problem = check_snakemake(args)
        elif (args := _after(cmd.words, "dvc")) is not None:
            problem = check_dvc(args)
        elif (script := _script(cmd.words)) is not None and not script.is_file():
            problem = f"no script {script.relative_to(PROJECT)}"
        if problem:
            out.append(f"{cmd.where()}: {problem}")
    return out


# --- the tests ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_command_in_the_docs_exists(path):
    problems = problems_in(path)
    assert not problems, "commands in the docs that do not exist:\n" + "\n".join(problems)


def test_the_docs_show_commands_of_every_kind():
    """The check above reads real commands: the README and docs show each kind it checks."""
    words = [c.words for p in DOC_FILES for c in commands(p)]
    for program in ("mmir", "make", "snakemake", "dvc"):
        assert any(_after(w, program) is not None for w in words), program
    assert any((_after(w, "snakemake") or _after(w, "mmir")) and "--profile" in w for w in words)
    assert any(_after(w, "dvc") and "-S" in w for w in words)


@pytest.mark.parametrize(("command", "expected"), [
    ("make tset", "no Makefile target tset"),
    ("python -m mmir mmdr", "invalid choice: 'mmdr'"),
    (".venv/bin/python -m mmir validate --bogus", "unrecognized arguments: --bogus"),
    ("python -m mmir snakemake trak --task task1", "unknown stage family 'trak'"),
    ("python -m mmir job retrieeve task=task1", "no rule 'retrieeve'"),
    ("mmir run --profile slurmm", "no profile directory 'slurmm'"),
    ("snakemake --profile profiles/slurmm", "no profile directory 'profiles/slurmm'"),
    ("snakemake --cores 2 --configfile workflow/configs/nope.yaml off.yaml", "no config file 'workflow/configs/nope.yaml'"),
    ("dvc repro track@task1", "no DVC stage track@task1"),
    ("dvc exp run -S systems.bm25.k11=1.2", "no config key systems.bm25.k11"),
    ("dvc exp run -S ++systems.bm25.k11=1.2", "no config key ++systems.bm25.k11"),
    (".venv/bin/python bench/bench_bm26.py", "no script bench/bench_bm26.py"),
])
def test_a_misspelt_command_fails_naming_file_line_and_command(tmp_path, command, expected):
    doc = tmp_path / "README.md"
    doc.write_text(f"# t\n\nSome text.\n\n```bash\nmake run\n{command}   # a comment\n```\n")
    problems = problems_in(doc)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{doc}:7: `{command}`: ") and expected in problems[0], problems[0]


@pytest.mark.parametrize("command", [
    "make run", "make test", "make docs", "python -m mmir --configfile /tmp/my.yaml validate",
    "python -m mmir snakemake task --task task1 -- -n", "mmir targets prepare --dataset openstax",
    "mmir run --profile slurm -n --configfile workflow/configs/mm-bright-hub.yaml off.yaml", "mmir run -n",
    "mmir init my-project --dataset vaswani=beir:data/vaswani --system bm25 --task task1",
    "dvc repro task@task1", "dvc repro prepare@openstax", "dvc repro prepare@<dataset>", "dvc exp run -S systems.bm25.k1=1.2",
    "make test 2>&1 | tail -3 > /tmp/log",
    "cat > /tmp/x.yaml <<'YAML'\nmake tset\nYAML",   # a heredoc body is data, not a command
])
def test_commands_that_exist_pass(tmp_path, command):
    doc = tmp_path / "page.md"
    doc.write_text(f"```bash\n{command}\n```\n\n```yaml\nmake: tset\n```\n")
    assert problems_in(doc) == []


def test_dvc_stages_match_dvc_stage_list():
    """The foreach expansion gives the stage names ``dvc stage list`` prints for the default params.yaml."""
    stages = dvc_stages()
    assert {"captions", "ablations", "rag", "m2rag", "mmdr", "essentiality", "reproduction", "report"} <= stages
    assert {f"task@task{i}" for i in range(1, 5)} <= stages
    assert {"prepare@openstax", "prepare@vaswani"} <= stages
    assert not any(s.startswith(("track", "retrieve", "score", "caption@")) for s in stages)


def test_dvc_stages_equal_what_dvc_stage_list_prints():
    dvc = shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")
    if dvc is None:
        pytest.skip("dvc is not installed")
    listed = subprocess.run([dvc, "stage", "list"], cwd=PROJECT, capture_output=True, text=True, timeout=300, check=True)
    assert {line.split()[0] for line in listed.stdout.splitlines() if line.strip()} == dvc_stages()


# --- the files and modules the docs name ----------------------------------------------------------------------------


def missing_references(path: Path) -> list[str]:
    """Project paths (``src/…``, ``tests/…``, ``bench/…``, ``workflow/…``, ``expected/…``, ``docs/…``) and ``mmir.…``
    modules (with a function, class or constant after them) named in backticks in ``path`` that do not exist."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for ref in re.findall(r"`((?:src|tests|bench|workflow|expected|docs)/[^`\s{}<>*…]+)`", line):
            if not (PROJECT / ref).exists():
                out.append(f"{path.name}:{number}: no file {ref}")
        for ref in re.findall(r"`(mmir(?:\.\w+)+)", line):
            parts = ref.split(".")
            for k in range(len(parts), 0, -1):
                base = PROJECT / "src" / Path(*parts[:k])
                module = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
                if module.exists():
                    rest = parts[k:]
                    pattern = rf"^\s*(?:(?:async\s+)?def|class)\s+{re.escape(rest[0])}\b|^{re.escape(rest[0])}\s*[:=]" if rest else ""
                    if rest and not re.search(pattern, module.read_text(encoding="utf-8"), re.M):
                        out.append(f"{path.name}:{number}: {'.'.join(parts[:k])} has no {rest[0]}")
                    break
            else:
                out.append(f"{path.name}:{number}: no module {ref}")
    return out


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_file_and_module_the_docs_name_exists(path):
    missing = missing_references(path)
    assert not missing, "\n".join(missing)


def test_a_renamed_module_or_file_fails(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("`mmir.retrieval.topk.topk_inner_product` in `src/mmir/retrieval/topk.py`\n"
                   "`mmir.retrieval.topk.top_k` and `mmir.retreival` in `bench/bench_nothing.py`\n")
    assert missing_references(doc) == ["page.md:2: no file bench/bench_nothing.py", "page.md:2: mmir.retrieval.topk has no top_k",
                                       "page.md:2: mmir has no retreival"]


# --- the architecture page's module sizes ---------------------------------------------------------------------------


def test_every_long_module_is_listed_in_the_architecture_page():
    page = (PROJECT / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"^\| `(src/mmir/[\w/]+\.py)` \|", page, re.M))
    long = {str(p.relative_to(PROJECT)) for p in (PROJECT / "src" / "mmir").rglob("*.py")
            if len(p.read_text(encoding="utf-8").splitlines()) > 500}
    assert not long - listed, f"modules over 500 lines without a reason in docs/architecture.md: {sorted(long - listed)}"
    assert not {m for m in listed if not (PROJECT / m).exists()}, "docs/architecture.md lists modules that do not exist"


# --- the configuration reference generator --------------------------------------------------------------------------


# --- the YAML examples ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class YamlExample:
    """One YAML example of a doc: a fenced ``yaml`` block, or a heredoc body a shell block writes to a ``.yaml`` file;
    ``line`` is the line of its first YAML line."""

    path: Path
    line: int
    text: str

    def where(self) -> str:
        rel = self.path.relative_to(PROJECT) if self.path.is_relative_to(PROJECT) else self.path
        return f"{rel}:{self.line}"


def yaml_examples(path: Path) -> list[YamlExample]:
    """Every YAML example of a markdown file, in file order."""
    out, fence, lang, start, body = [], None, "", 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if fence is None:
            if m := re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped):
                fence, lang, start, body = m.group(1), m.group(2).lower(), number + 1, []
        elif stripped.startswith(fence):
            if lang in ("yaml", "yml"):
                out.append(YamlExample(path, start, "\n".join(body)))
            elif lang in SHELL_LANGS:
                out += _heredoc_yaml(path, start, body)
            fence = None
        else:
            body.append(line)
    return out


def _heredoc_yaml(path: Path, start: int, lines: list[str]) -> list[YamlExample]:
    """The heredoc bodies of a shell block that are written to a ``.yaml``/``.yml`` file (``cat > x.yaml <<'YAML'``)."""
    out, i = [], 0
    while i < len(lines):
        m = re.search(r">\s*(\S+\.ya?ml)\s+<<-?\s*['\"]?(\w+)['\"]?", lines[i])
        i += 1
        if m:
            first = i
            while i < len(lines) and lines[i].strip() != m.group(2):
                i += 1
            out.append(YamlExample(path, start + first, "\n".join(lines[first:i])))
    return out


#: the top-level keys of an expected-scores file (``expected/*.yaml``, :mod:`mmir.evaluation.expected`)
EXPECTED_FILE_KEYS = {"defaults", "entries"}


def check_yaml_example(example: YamlExample, tmp_path: Path) -> str | None:
    """Why ``example`` does not validate as shown, or None. A mapping with ``entries`` is an expected-scores file
    (:func:`mmir.evaluation.expected.load_expected`); any other is a config: a whole one where it names both
    ``datasets`` and ``systems`` and validates alone, else an overlay on params.yaml (merged as ``--configfile`` does);
    a fragment under a section's key (``audit:``) so validates as that section. A config is validated as far as it
    goes without the outside world (models, presets, cross-references of every section; not whether its paths,
    environment variables or hub repositories exist)."""
    from mmir.config import merge_overlay

    try:
        data = yaml.safe_load(example.text)
    except yaml.YAMLError as exc:
        return f"not valid YAML: {exc}"
    if not isinstance(data, dict):
        return f"not a mapping: {type(data).__name__}"
    if set(data) <= EXPECTED_FILE_KEYS and "entries" in data:
        from mmir.evaluation.expected import load_expected

        f = tmp_path / "expected.yaml"
        f.write_text(example.text, encoding="utf-8")
        try:
            load_expected([f])
        except ValueError as exc:
            return f"not a valid expected-scores file: {exc}"
        return None
    if {"datasets", "systems"} <= set(data) and _config_problem(copy.deepcopy(data)) is None:
        return None
    merged = merge_overlay(yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8")), data)
    problem = _config_problem(merged)
    return None if problem is None else f"as an overlay on params.yaml: {problem}"


def _config_problem(config: dict) -> str | None:
    from mmir import config as cfg
    from mmir.benchmarks.m2rag.check import check as check_m2rag
    from mmir.benchmarks.mmbright.check import check as check_mmbright
    from mmir.benchmarks.mmdr.check import check as check_mmdr
    from mmir.benchmarks.rag.check import check as check_rag
    from mmir.config.models import parse_params
    from mmir.core.errors import ConfigError
    from mmir.workflow.validate import check_rerank

    try:
        cfg.validate_config(config)
        params = parse_params(config)
        for check in (check_mmbright, check_rag, check_m2rag, check_mmdr, check_rerank):
            check(params)
    except ConfigError as exc:
        if re.fullmatch(r"datasets\.[^.]+\.root", exc.key or ""):
            return None  # a check that lists a dataset's domains on disk (rerank.runs' units): a placeholder root
        return str(exc)
    return None


YAML_EXAMPLES = [e for f in DOC_FILES for e in yaml_examples(f)]


def test_the_docs_show_yaml_examples_of_every_kind():
    texts = [e.text for e in YAML_EXAMPLES]
    assert len(YAML_EXAMPLES) >= 20 and any("entries:" in t for t in texts)  # configs, sections, an expected file
    assert any(e.path.name == "README.md" and "openstax" in e.text for e in YAML_EXAMPLES)  # a heredoc's overlay


@pytest.mark.parametrize("example", YAML_EXAMPLES, ids=lambda e: e.where())
def test_every_yaml_example_validates_as_shown(example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    problem = check_yaml_example(example, tmp_path)
    assert problem is None, f"{example.where()}: the YAML example does not validate: {problem}"


@pytest.mark.parametrize("text, expected", [
    ("systems:\n  bm25: {kind: bm25, k1: 0.9, kk: 1}\n", "systems.bm25.kk"),
    ("  vaswani: {source: trec, root: x, corpus: c, topics: t, qrels: q}\n", "vaswani"),
    ("entries:\n  - {benchmark: b, task: task1}\n", "missing"),
    ("rag: {k: [}\n", "not valid YAML"),
])
def test_a_wrong_yaml_example_fails_naming_file_and_line(tmp_path, text, expected):
    doc = tmp_path / "doc.md"
    doc.write_text(f"Some text.\n\n```yaml\n{text}```\n")
    [example] = yaml_examples(doc)
    assert example.where().endswith("doc.md:4")
    problem = check_yaml_example(example, tmp_path)
    assert problem is not None and expected in problem, problem


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_reference", PROJECT / "docs" / "gen_config_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_the_reference_walks_fields_variants_and_defaults():
    from typing import Annotated, Literal

    from pydantic import BaseModel, ConfigDict, Field

    class BM25(BaseModel):
        model_config = ConfigDict(extra="forbid")
        kind: Literal["bm25"] = Field(description="the retriever family")
        k1: float = Field(0.9, description="term-frequency saturation.\n\nMore text that is not the first line.")

    class Dense(BaseModel):
        kind: Literal["dense"]
        model: str = Field(description="hub id or local path")
        templates: list[str] = Field(default_factory=lambda: ["query: {text}"], description="query templates")

    class Evaluation(BaseModel):
        top_k: int = Field(1000, description="depth of every run file")
        protocol: Literal["official", "strict"] = Field("official", description="negative_ids removed or kept")

    class Params(BaseModel):
        systems: dict[str, Annotated[BM25 | Dense, Field(discriminator="kind")]] = Field(description="named systems")
        evaluation: Evaluation = Field(default_factory=Evaluation, description="scoring settings")
        expected: list[str] | None = Field(None, description="files of expected scores")

    gen = _generator()
    rows = {r.key: r for r in gen.field_rows(Params)}
    assert list(rows) == ["systems", "systems.<name>.kind", "systems.<name>.k1", "systems.<name>.model",
                          "systems.<name>.templates", "evaluation", "evaluation.top_k", "evaluation.protocol", "expected"]
    assert rows["systems.<name>.k1"] == gen.Row("systems.<name>.k1", "float", "0.9", "term-frequency saturation.", "BM25")
    assert rows["systems.<name>.model"].default == "required" and rows["systems.<name>.model"].variant == "Dense"
    assert rows["systems.<name>.templates"].default == '["query: {text}"]'
    assert rows["evaluation"].default == '{"top_k": 1000, "protocol": "official"}'
    assert rows["evaluation.protocol"].type == '"official" | "strict"'
    assert rows["expected"].type == "list[str] | None" and rows["expected"].default == "null"
    page = gen.render(Params)
    assert "## `systems`" in page and "## `evaluation`" in page
    assert "| `systems.<name>.k1` | float | `0.9` | term-frequency saturation. | `BM25` |" in page
    assert "| `evaluation.top_k` | int | `1000` | depth of every run file |" in page
    assert '| `evaluation.protocol` | "official" \\| "strict" | `"official"` | negative_ids removed or kept |' in page


def test_the_index_lists_every_page_and_every_data_source():
    """docs/index.md's page table links every hand-written page, and its data row names every dataset source."""
    import typing as t

    from mmir.config.models import datasets as D

    index = (PROJECT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    pages = {p.name for p in (PROJECT / "docs").glob("*.md")} - {"index.md"}
    assert pages - linked == set(), f"docs/index.md does not list {sorted(pages - linked)}"
    row = next(line for line in index.splitlines() if "(data.md)" in line)
    sources = {a for m in vars(D).values() if isinstance(m, type) and "source" in getattr(m, "model_fields", {})
               for a in t.get_args(m.model_fields["source"].annotation)}
    assert sources and {s for s in sources if f"`{s}`" not in row} == set(), row
