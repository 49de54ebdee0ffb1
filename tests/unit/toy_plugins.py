"""Small real plug-ins for the tests of ``backend: plugin``, written as a source file the tests place on the Python path
(outside any distribution) or inside a hand-made installed distribution (a ``.dist-info`` folder, as pip writes one).

``Counts`` (dense): IDF-weighted term counts over the vocabulary learnt in ``fit`` plus a constant last dimension;
``Tokens`` (multivector): one vector per known word (its IDF-weighted one-hot row) plus a constant row; ``Colours``
(mm): a text's words hashed into 5 dimensions, an image's mean RGB in 3 more; ``Overlap`` (reranker): the dot product
of the query's and each candidate's ``Counts`` vectors. ``mode`` makes batch ``bad_batch`` wrong in one way.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

SOURCE = textwrap.dedent('''
    import zlib

    import numpy as np


    def _bad(out, mode):
        """One batch's output made wrong in the way ``mode`` names."""
        if mode == "raise":
            raise RuntimeError("toy failure")
        if isinstance(out, list):
            return {"count": out[1:], "dtype": [m.astype(np.float64) for m in out], "shape": [m[0] for m in out],
                    "nan": [np.full_like(m, np.nan) for m in out], "inf": [np.full_like(m, np.inf) for m in out],
                    "dim": [m[:, :2] for m in out], "type": np.stack([m[0] for m in out])}[mode]
        out = out.copy()
        if mode == "nan":
            out.flat[0] = np.nan
            return out
        if mode == "inf":
            out.flat[-1] = np.inf
            return out
        return {"shape": out[..., None], "dtype": out.astype(np.float64), "count": out[1:], "dim": out[..., :2],
                "type": out.tolist()}[mode]


    class Counts:
        """A dense plug-in with fit."""

        def __init__(self, mode="ok", bad_batch=1):
            self.mode, self.bad_batch, self.calls, self.vocab, self.fitted_on = mode, int(bad_batch), 0, None, None

        def fit(self, documents):
            self.fitted_on = list(documents)
            words = sorted({w for d in documents for w in d.lower().split()})
            self.vocab = {w: i for i, w in enumerate(words)}
            df = np.array([sum(w in d.lower().split() for d in documents) for w in words], dtype=np.float32)
            self.idf = (np.log((1 + len(documents)) / (1 + df)) + 1).astype(np.float32)

        def vectors(self, texts):
            v = np.zeros((len(texts), len(self.vocab) + 1), dtype=np.float32)
            for r, t in enumerate(texts):
                for w in t.lower().split():
                    if w in self.vocab:
                        v[r, self.vocab[w]] += self.idf[self.vocab[w]]
            v[:, -1] = 0.01
            return v

        def _out(self, out):
            self.calls += 1
            return _bad(out, self.mode) if self.mode != "ok" and self.calls == self.bad_batch else out

        def encode_queries(self, texts):
            return self._out(self.vectors(texts))

        def encode_documents(self, texts):
            return self._out(self.vectors(texts))


    class Tokens(Counts):
        """A multi-vector plug-in: a row per known word, and a constant row."""

        def tokens(self, texts):
            out = []
            for t in texts:
                rows = [np.eye(len(self.vocab) + 1, dtype=np.float32)[self.vocab[w]] * self.idf[self.vocab[w]]
                        for w in t.lower().split() if w in self.vocab]
                out.append(np.stack([*rows, np.eye(len(self.vocab) + 1, dtype=np.float32)[-1]]))
            return out

        def encode_queries(self, texts):
            return self._out(self.tokens(texts))

        def encode_documents(self, texts):
            return self._out(self.tokens(texts))


    class Colours:
        """An mm plug-in without fit: words hashed into 5 dimensions, an image's mean RGB into 3 more."""

        def __init__(self, mode="ok", bad_batch=1):
            self.mode, self.bad_batch, self.calls = mode, int(bad_batch), 0

        def _out(self, out):
            self.calls += 1
            return _bad(out, self.mode) if self.mode != "ok" and self.calls == self.bad_batch else out

        def encode_texts(self, texts, role):
            v = np.zeros((len(texts), 8), dtype=np.float32)
            for r, t in enumerate(texts):
                for w in t.lower().split():
                    v[r, zlib.crc32(w.encode()) % 5] += 1
            v[:, 4] += 0.5 if role == "query" else 0.25
            return self._out(v)

        def encode_images(self, images, role):
            v = np.zeros((len(images), 8), dtype=np.float32)
            for r, im in enumerate(images):
                v[r, 5:] = np.asarray(im.convert("RGB"), dtype=np.float32).reshape(-1, 3).mean(axis=0) / 255 + 0.01
            return self._out(v)


    class Overlap(Counts):
        """A reranker: the dot product of Counts vectors."""

        def score(self, query, candidates):
            v = self.vectors([query, *candidates])
            return self._out((v[1:] @ v[0]).astype(np.float32))


    def make_counts(**options):
        return Counts(**options)


    NOT_CALLABLE = 3
''')


def write_module(folder: Path, name: str, extra: str = "") -> Path:
    """``folder/<name>.py`` holding :data:`SOURCE` (plus ``extra``); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(SOURCE + extra, encoding="utf-8")
    return path


def write_distribution(site: Path, dist: str, version: str, *, entry_points: dict[str, str] | None = None,
                       editable_root: Path | None = None) -> Path:
    """An installed distribution ``dist`` in ``site`` as pip writes one: its package ``<dist>/__init__.py`` holding
    :data:`SOURCE` and ``<dist>-<version>.dist-info`` (METADATA, RECORD, top_level.txt, entry points in the group
    ``mmir.plugins``). ``editable_root``: an editable install instead (the package lives there; RECORD lists no source,
    ``direct_url.json`` names the folder). Returns the package's ``__init__.py``."""
    for old in site.glob(f"{dist}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    pkg_root = editable_root / "src" if editable_root is not None else site
    pkg = pkg_root / dist
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(SOURCE, encoding="utf-8")
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "top_level.txt").write_text(f"{dist}\n", encoding="utf-8")
    if entry_points:
        (info / "entry_points.txt").write_text("[mmir.plugins]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))
    files = [f"{info.name}/METADATA", f"{info.name}/top_level.txt", f"{info.name}/RECORD"]
    if editable_root is None:
        files.insert(0, f"{dist}/__init__.py")
    else:
        (info / "direct_url.json").write_text(f'{{"url": "{editable_root.resolve().as_uri()}", "dir_info": {{"editable": true}}}}')
        files.append(f"{info.name}/direct_url.json")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files), encoding="utf-8")
    return pkg / "__init__.py"


def forget(module: str) -> None:
    """Drop ``module`` from ``sys.modules`` (a test that rewrites a plug-in imports it afresh)."""
    sys.modules.pop(module, None)
