"""The no-cycle import contracts of pyproject.toml (import-linter; the ``acyclic`` type is tools/importlinter_acyclic.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from conftest import PROJECT

sys.path.insert(0, str(PROJECT))
from tools.importlinter_acyclic import shortest_cycle, strongly_connected  # noqa: E402

BIN = Path(sys.executable).parent
CONTRACT = "No import cycles between modules"


def lint(root: Path) -> subprocess.CompletedProcess:
    lint_imports = BIN / "lint-imports"
    if not lint_imports.exists():
        pytest.skip("import-linter is not installed")
    return subprocess.run([str(lint_imports)], cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PATH": str(BIN), "PYTHONPATH": str(root / "src"), "COLUMNS": "200"})


def copy_project(tmp_path: Path) -> Path:
    for d in ("src", "tools"):
        shutil.copytree(PROJECT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT / "pyproject.toml", tmp_path)
    return tmp_path


def test_no_import_cycles_in_mmir():
    out = lint(PROJECT).stdout
    assert f"{CONTRACT} KEPT" in out, out[-3000:]


def test_cycle_contracts_break_on_a_deliberate_cycle_and_name_it(tmp_path):
    root = copy_project(tmp_path)
    base = root / "src" / "mmir" / "encoders" / "text_base.py"
    base.write_text(base.read_text() + "\nfrom mmir.encoders import text  # noqa: E402,F401 (a deliberate cycle)\n")
    out = lint(root).stdout
    assert f"{CONTRACT} BROKEN" in out, out[-3000:]
    # the whole cycle, then each import of it with its line
    assert "Import cycle: mmir.encoders.embeddings_api -> mmir.encoders.text_base -> mmir.encoders.text -> " \
           "mmir.encoders.embeddings_api" in out, out[-3000:]
    line = len(base.read_text().splitlines())  # the import appended last
    assert f"    mmir.encoders.text_base -> mmir.encoders.text (l.{line})" in out


def test_module_contract_sees_a_cycle_through_a_package_init(tmp_path):
    """A child importing its own package while the package's __init__ imports the child (import-linter's
    acyclic_siblings squashes the package and cannot see it)."""
    root = copy_project(tmp_path)
    base = root / "src" / "mmir" / "encoders" / "multimodal" / "base.py"
    base.write_text(base.read_text() + "\nfrom mmir.encoders.multimodal import MM_MODELS  # noqa: E402,F401\n")
    out = lint(root).stdout
    assert f"{CONTRACT} BROKEN" in out, out[-3000:]
    assert "Import cycle: mmir.encoders.multimodal -> mmir.encoders.multimodal.base -> mmir.encoders.multimodal" in out


def test_tarjan_components_and_shortest_cycle_on_a_small_graph():
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c", "p.d", "p.e"):
        g.add_module(m)
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.b", "p.a"),
                               ("p.e", "p.e"), ("p", "p.d")]:
        g.add_import(importer=importer, imported=imported)
    modules = {"p", "p.a", "p.b", "p.c", "p.d", "p.e"}
    assert strongly_connected(g, modules) == [["p.a", "p.b", "p.c"], ["p.e"]]
    assert shortest_cycle(g, ["p.a", "p.b", "p.c"]) == ["p.a", "p.b", "p.a"]
    assert shortest_cycle(g, ["p.e"]) == ["p.e", "p.e"]
    g.remove_import(importer="p.b", imported="p.a")
    assert shortest_cycle(g, ["p.a", "p.b", "p.c"]) == ["p.a", "p.b", "p.c", "p.a"]
    g.remove_import(importer="p.c", imported="p.a")
    assert strongly_connected(g, modules) == [["p.e"]]
