"""Prompt files: every prompt is ``<folder>/<name>.txt`` with a name (its id) and the sha256 of its text.

Placeholders use :class:`string.Template` syntax (``$query``; ``$$`` a literal dollar). A new version is a new
file; the text hash is in every generation-cache key.
"""

from __future__ import annotations

import hashlib
import re
import string
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned prompt template; ``id`` (e.g. ``"reformulate_v1"``) is the ``template_id`` of cache keys."""

    id: str
    text: str
    path: Path | None = None

    @property
    def sha256(self) -> str:
        """Hex sha256 of the template text (UTF-8)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def fields(self) -> list[str]:
        """Placeholder names in the template, in order of first use."""
        names = []
        for m in string.Template.pattern.finditer(self.text):
            name = m.group("named") or m.group("braced")
            if name and name not in names:
                names.append(name)
        return names

    def _check_fields(self, fields: dict[str, Any]) -> dict[str, str]:
        wanted = set(self.fields)
        missing, extra = sorted(wanted - set(fields)), sorted(set(fields) - wanted)
        if missing or extra:
            raise ValueError(f"prompt '{self.id}' takes fields {sorted(wanted)}; missing {missing}, unknown {extra}")
        return {k: str(v) for k, v in fields.items()}

    def render(self, **fields: Any) -> str:
        """The template with ``$name`` placeholders filled from ``fields`` (values converted with ``str``).

        Raises:
            ValueError: a placeholder has no value, or a field is not used by the template.
        """
        return string.Template(self.text).substitute(self._check_fields(fields))

    def render_around(self, slot: str, **fields: Any) -> tuple[str, str]:
        """The text before and after the first ``slot`` marker, each rendered with ``fields`` separately.

        Raises:
            ValueError: no ``slot`` in the template, or ``fields`` misses or adds a placeholder.
        """
        if slot not in self.text:
            raise ValueError(f"prompt '{self.id}' has no {slot} slot")
        values = self._check_fields(fields)
        before, after = self.text.split(slot, 1)
        return string.Template(before).substitute(values), string.Template(after).substitute(values)


def load_prompt(name: str, prompts_dir: str | Path) -> PromptTemplate:
    """Read the template ``<prompts_dir>/<name>.txt``.

    Raises:
        ValueError: ``name`` is not a plain file stem (no paths).
        FileNotFoundError: no such template; the message lists those available.
    """
    if not _NAME.match(name) or name.endswith(".txt"):
        raise ValueError(f"prompt name must be a plain name like 'reformulate_v1', got {name!r}")
    folder = Path(prompts_dir)
    path = folder / f"{name}.txt"
    if not path.is_file():
        available = sorted(p.stem for p in folder.glob("*.txt")) if folder.is_dir() else []
        raise FileNotFoundError(f"no prompt template '{name}' in {folder}; available: {available}")
    return PromptTemplate(id=name, text=path.read_text(encoding="utf-8"), path=path)


class PromptLibrary:
    """The prompt files of one folder (a benchmark's ``prompts/``), each read once (thread-safe)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._loaded: dict[str, PromptTemplate] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PromptLibrary({str(self.folder)!r})"

    def get(self, name: str) -> PromptTemplate:
        """The template ``<folder>/<name>.txt``.

        Raises:
            ValueError: not a plain name; FileNotFoundError: no such file (the message lists those available).
        """
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = load_prompt(name, self.folder)
            return self._loaded[name]

    __call__ = get

    def names(self) -> list[str]:
        """Every template name in the folder, sorted."""
        return sorted(p.stem for p in self.folder.glob("*.txt"))

    def hashes(self, used_only: bool = True) -> dict[str, str]:
        """``{name: sha256}`` of the templates read so far (``used_only``) or of every file in the folder."""
        if not used_only:
            return {n: self.get(n).sha256 for n in self.names()}
        with self._lock:
            return {k: t.sha256 for k, t in sorted(self._loaded.items())}
