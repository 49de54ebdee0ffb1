"""MkDocs hooks (mkdocs.yml ``hooks:``): the configuration reference page is generated from the config models at
every build (``gen_config_reference.render``), so it is never committed and cannot drift from them."""

import sys
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_config_reference import render, root_model  # noqa: E402


def on_files(files, config):
    files.append(File.generated(config, "config-reference.md", content=render(root_model())))
    return files
