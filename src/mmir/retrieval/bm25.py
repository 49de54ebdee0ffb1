"""BM25 over a tokenised corpus: bm25s (fast, default) or rank_bm25 (reference).

Both backends share the tokenisation of ``bm25s.tokenize`` (the system's Unicode normal form, lowercasing, token
pattern, stopwords and stemmer: :func:`make_tokenizer`); BRIGHT/MM-BRIGHT use Lucene BM25, k1=0.9, b=0.4
(``method: lucene``); rank_bm25's BM25Okapi equals bm25s ``robertson`` unless a term is in over half the
documents. The bm25s backend indexes in chunks of ``chunk_docs`` (:func:`build_bm25s_index`), with scores
identical to ``bm25s.BM25.index``. :func:`bm25_topk` is the top-k of one score vector over the documents that share
a term with the query. :meth:`BM25.topk` scores the queries in a numba kernel (:mod:`mmir.retrieval.bm25_kernel`) with
the same float32 additions as bm25s (bit-identical scores) and returns what :func:`bm25_topk` of each score vector
returns.

What a run holds: only the documents that share a term with the query, at most ``k`` (Anserini/Pyserini's convention:
Lucene returns matching documents only). A document matching no term has no evidence for it (score 0 under
``lucene``); ranking such documents would make their order, and whether a gold one counts as retrieved, a matter of
the corpus order or of their ids. Ties rank by lower index, and the prepared corpus lists documents in trec_eval's
tie order (:func:`mmir.data.prepare.canonical_order`), so no run depends on the order of lines in the source.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection, Iterable, Sequence

import numpy as np

from mmir.config.models import BM25System
from mmir.retrieval.topk import PAD_INDEX, topk_scores

#: documents tokenised per step by the bm25s backend (bounds the Python token lists alive at once)
CHUNK_DOCS = 2048
#: queries per call of the numba kernel in :meth:`BM25.topk` (the progress callback is called between calls)
QUERIES_PER_CALL = 256
# keyword defaults = the bm25 system defaults of the config (one definition: BM25System)
_SYSTEM = BM25System(kind="bm25").model_dump()


def normalizer(form: str | None):
    """``str -> str``: ``unicodedata.normalize(form, text)``, or the text itself when ``form`` is None."""
    if form is None:
        return str
    import unicodedata

    return functools.partial(unicodedata.normalize, form)


def _stemmer(name: str | None):
    """PyStemmer's ``Stemmer(name)`` (None: no stemming).

    Raises:
        ValueError: ``name`` is not one of PyStemmer's algorithms (the error lists them).
    """
    if not name:
        return None
    import Stemmer

    if name not in Stemmer.algorithms():
        raise ValueError(f"stemmer {name!r} is not a PyStemmer algorithm (one of {', '.join(Stemmer.algorithms())}; null = none)")
    return Stemmer.Stemmer(name)


def make_tokenizer(stopwords: str | Sequence[str] | None = _SYSTEM["stopwords"], stemmer: str | None = _SYSTEM["stemmer"], *,
                   token_pattern: str = _SYSTEM["token_pattern"], lowercase: bool = _SYSTEM["lowercase"],
                   unicode_normalization: str | None = _SYSTEM["unicode_normalization"]):
    """A function ``list[str] -> list[list[str]]``: each text put in ``unicode_normalization`` form, then
    ``bm25s.tokenize`` with the other settings (lowercase, the tokens ``token_pattern`` matches, stopwords removed,
    stemmed)."""
    import bm25s

    stem = _stemmer(stemmer)
    norm = normalizer(unicode_normalization)

    def tokenize(texts: Sequence[str]) -> list[list[str]]:
        return bm25s.tokenize([norm(t) for t in texts], lower=lowercase, token_pattern=token_pattern,
                              stopwords=_stopwords(stopwords), stemmer=stem.stemWords if stem else None, return_ids=False,
                              show_progress=False)

    return tokenize


def make_id_tokenizer(stopwords: str | Sequence[str] | None = _SYSTEM["stopwords"], stemmer: str | None = _SYSTEM["stemmer"], *,
                      token_pattern: str = _SYSTEM["token_pattern"], lowercase: bool = _SYSTEM["lowercase"]):
    """bm25s's id-based ``Tokenizer`` with the same tokens as :func:`make_tokenizer` (ids into one vocabulary), for
    texts already in the normal form (:func:`normalizer`)."""
    from bm25s.tokenization import Tokenizer

    return Tokenizer(lower=lowercase, splitter=token_pattern, stopwords=_stopwords(stopwords), stemmer=_stemmer(stemmer))


def _stopwords(stopwords: str | Sequence[str] | None) -> str | list[str]:
    """bm25s's ``stopwords`` argument: a list name, a list of words, ``[]`` for none."""
    return [] if not stopwords else stopwords if isinstance(stopwords, str) else list(stopwords)


def _chunk_pairs(token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(doc, term int32, tf)`` of each distinct (document, term) of a chunk, sorted by (document, term), and the
    documents' lengths (int64). ``doc`` is the document's position in the chunk and ``tf`` its count, both in the
    narrowest unsigned type that holds them (uint16 unless a chunk or a count exceeds 65,535)."""
    lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
    flat = np.fromiter(itertools.chain.from_iterable(token_ids), dtype=np.int64, count=int(lengths.sum()))
    docs = np.repeat(np.arange(len(token_ids), dtype=np.int64), lengths)
    packed, tf = np.unique((docs << 32) | flat, return_counts=True)

    def narrow(a):
        return a.astype(np.uint16 if a.size == 0 or a.max() <= 0xFFFF else np.uint32)

    return narrow(packed >> 32), (packed & 0xFFFFFFFF).astype(np.int32), narrow(tf), lengths


def build_bm25s_index(corpus: Iterable[str], tokenizer, *, method: str, k1: float, b: float,
                      delta: float = 0.5, chunk_docs: int = CHUNK_DOCS):
    """A ``bm25s.BM25`` equal to ``bm25s.BM25(...).index(token strings)``, built by chunks; returns ``(index, n_docs)``.

    Memory: one chunk of token lists plus about 16 bytes per distinct (document, term) pair.
    """
    import bm25s
    from bm25s.scoring import (
        _build_idf_array,
        _build_nonoccurrence_array,
        _select_idf_scorer,
        _select_tfc_scorer,
    )

    parts, lengths = [], []
    n = 0
    it = iter(corpus)
    while chunk := list(itertools.islice(it, chunk_docs)):
        ids = tokenizer.tokenize(chunk, update_vocab=True, return_as="ids", show_progress=False, allow_empty=False)
        del chunk
        d, t, tf, ln = _chunk_pairs(ids)
        del ids
        parts.append((n, d, t, tf))
        lengths.append(ln)
        n += len(ln)
    # numpy backend: with numba installed bm25s would default to jitting get_scores_from_ids (a compile of seconds
    # on first use); mmir's batched path has its own kernel (mmir.retrieval.bm25_kernel)
    index = bm25s.BM25(method=method, k1=k1, b=b, delta=delta, backend="numpy")
    vocab = tokenizer.get_vocab_dict()
    n_vocab = len(vocab)
    doc_len = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    avg_doc_len = doc_len.mean() if n else np.float64(np.nan)  # as bm25s: np.array(lengths).mean()
    df = np.zeros(n_vocab, dtype=np.int64)
    for _, _, t, _ in parts:
        df += np.bincount(t, minlength=n_vocab)
    doc_frequencies = dict(enumerate(df.tolist()))
    idf_array = _build_idf_array(doc_frequencies, n_docs=n, compute_idf_fn=_select_idf_scorer(index.idf_method),
                                 dtype=index.dtype)
    tfc_fn = _select_tfc_scorer(method)
    nonocc = None
    if method in index.methods_requiring_nonoccurrence:
        nonocc = _build_nonoccurrence_array(doc_frequencies, n_docs=n, compute_idf_fn=_select_idf_scorer(index.idf_method),
                                            calculate_tfc_fn=tfc_fn, l_d=avg_doc_len, l_avg=avg_doc_len, k1=k1, b=b,
                                            delta=delta, dtype=index.dtype)
    del doc_frequencies
    # CSC by counting sort: column (term) pointers from df, then each chunk's entries placed in document order
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    data = np.empty(int(indptr[-1]), dtype=index.dtype)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    fill = indptr[:-1].copy()
    while parts:
        doc0, d, t, tf = parts.pop(0)
        if not t.size:  # a chunk of empty documents
            continue
        d = d.astype(np.int32) + np.int32(doc0)
        tf = tf.astype(np.float32)  # the counts bm25s takes from a Counter, as float32
        # the same elementwise float operations as bm25s's per-document loop (doc length int, avgdl float64)
        scores = idf_array[t] * tfc_fn(tf_array=tf, l_d=doc_len[d], l_avg=avg_doc_len, k1=k1, b=b, delta=delta)
        if nonocc is not None:
            scores -= nonocc[t]
        order = np.argsort(t, kind="stable")  # by term, documents ascending within a term
        ts = t[order]
        first = np.flatnonzero(np.concatenate([[True], ts[1:] != ts[:-1]]))
        counts = np.diff(np.concatenate([first, [ts.size]]))
        rank = np.arange(ts.size) - np.repeat(first, counts)
        dest = fill[ts] + rank
        data[dest] = scores[order]
        indices[dest] = d[order]
        fill[ts[first]] += counts
        del d, t, tf, scores, order, ts, dest, rank
    index.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": n}
    index.vocab_dict = vocab
    index.nonoccurrence_array = nonocc
    index.unique_token_ids_set = set(vocab.values())
    return index, n


class BM25:
    """A BM25 index over ``corpus`` (texts, index = corpus position).

    Args:
        corpus: any iterable of texts, read once ``chunk_docs`` at a time by the bm25s backend.
        backend: ``bm25s`` or ``rank_bm25`` (the reference; holds every token: small corpora only).
        method: bm25s variant (lucene, robertson, atire, bm25l, bm25+); rank_bm25 is always Okapi.
    """

    def __init__(self, corpus: Iterable[str], *, backend: str = _SYSTEM["backend"], method: str = _SYSTEM["method"],
                 k1: float = _SYSTEM["k1"], b: float = _SYSTEM["b"], stopwords: str | Sequence[str] | None = _SYSTEM["stopwords"],
                 stemmer: str | None = _SYSTEM["stemmer"], token_pattern: str = _SYSTEM["token_pattern"],
                 lowercase: bool = _SYSTEM["lowercase"], unicode_normalization: str | None = _SYSTEM["unicode_normalization"],
                 chunk_docs: int = CHUNK_DOCS):
        words = dict(token_pattern=token_pattern, lowercase=lowercase)
        self.tokenize = make_tokenizer(stopwords, stemmer, unicode_normalization=unicode_normalization, **words)
        self._norm = normalizer(unicode_normalization)
        self.backend = backend
        if backend == "bm25s":
            self._tok = make_id_tokenizer(stopwords, stemmer, **words)
            self._index, self.n = build_bm25s_index(map(self._norm, corpus), self._tok, method=method, k1=k1, b=b,
                                                    chunk_docs=chunk_docs)
        elif backend == "rank_bm25":
            from rank_bm25 import BM25Okapi

            tokens = self.tokenize(list(corpus))
            self.n = len(tokens)
            # rank_bm25 divides by zero on an empty document list; keep empty docs as a placeholder token
            self._index = BM25Okapi([t or ["\0"] for t in tokens], k1=k1, b=b)
        else:
            raise ValueError(f"unknown BM25 backend {backend!r}")

    def get_scores(self, query: str) -> np.ndarray:
        """Scores of every document for one query: float array of shape ``(n,)``."""
        return next(self.iter_scores([query]))

    def iter_scores(self, queries: Sequence[str]):
        """Yield the score vector (float, shape ``(n,)``; float32 for bm25s) of each query in order.

        Query terms absent from the corpus contribute nothing; a query without any known term scores 0 everywhere.
        """
        if self.backend == "rank_bm25":
            for toks in self.tokenize(queries):
                yield np.asarray(self._index.get_scores(toks)) if toks else np.zeros(self.n, dtype=np.float32)
            return
        for ids in self._tok.tokenize([self._norm(q) for q in queries], update_vocab=False, return_as="ids", show_progress=False,
                                      allow_empty=False):
            yield (np.asarray(self._index.get_scores_from_ids(ids)) if ids
                   else np.zeros(self.n, dtype=np.float32))

    def matched(self, query: str) -> np.ndarray:
        """The documents that share a term with ``query`` (after tokenisation), ascending int64 indices."""
        if self.backend == "rank_bm25":
            toks = set(self.tokenize([query])[0])
            return np.array([i for i, f in enumerate(self._index.doc_freqs) if toks & f.keys()], dtype=np.int64)
        ids = self._tok.tokenize([self._norm(query)], update_vocab=False, return_as="ids", show_progress=False,
                                 allow_empty=False)[0]
        return self._postings(ids)

    def _postings(self, term_ids: Sequence[int]) -> np.ndarray:
        """The union of the postings of ``term_ids`` (bm25s index), ascending int64 document indices."""
        s = self._index.scores
        ptr, idx = s["indptr"], s["indices"]
        parts = [idx[ptr[t]:ptr[t + 1]] for t in term_ids]
        return np.unique(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, np.int64)

    def topk(self, queries: Sequence[str], k: int, exclude: Sequence[Collection[int]] | None = None,
             progress=None) -> tuple[np.ndarray, np.ndarray]:
        """The top-k of each query: row ``r`` holds :func:`bm25_topk` of ``iter_scores`` of query ``r`` over the documents
        that share a term with it (``exclude[r]`` left out), padded to ``kk = min(k, n)`` with -inf and
        :data:`~mmir.retrieval.topk.PAD_INDEX` (dropped from the run: :func:`mmir.retrieval.retrievers.to_run`).

        Returns ``(scores float64 (q, kk), indices int64 (q, kk))``. ``progress(m)`` is called after each m queries.

        Why: bm25s scores a query with one ``np.add.at`` over its terms' postings and ranks the whole score vector.
        Here the numba kernel :func:`~mmir.retrieval.bm25_kernel.candidates` adds the same postings in the same
        order (query term, document) a tile of documents at a time, so every score is the same float32 sum, and
        keeps only the positive scores above a running k-th largest as keys ``(~float32 bits << 32 | document)``;
        numpy's partition and sort of the keys give the top-k (score descending, ties by document). A query with
        fewer than kk positive scores is ranked by :func:`bm25_topk` of its score vector over its matching documents.
        bm25l and bm25+ (a non-occurrence term added to every document) and the rank_bm25 backend score query by
        query. Memory: the output, the queries' term ids and 4 x kk keys for each of :data:`QUERIES_PER_CALL`.
        """
        q = len(queries)
        kk = max(0, min(k, self.n))
        if kk == 0 or self.backend != "bm25s" or self._index.nonoccurrence_array is not None:
            out_s = np.full((q, kk), -np.inf)
            out_i = np.full((q, kk), PAD_INDEX, dtype=np.int64)
            for r, scores in enumerate(self.iter_scores(queries)):
                s, i = bm25_topk(scores, kk, exclude[r] if exclude else (), self.matched(queries[r]))
                out_s[r, : len(s)], out_i[r, : len(i)] = s, i
                if progress:
                    progress(1)
            return out_s, out_i
        from mmir.retrieval import bm25_kernel

        out_s = np.empty((q, kk))  # every row written whole, by the kernel or below
        out_i = np.empty((q, kk), dtype=np.int64)
        ids = self._tok.tokenize([self._norm(q) for q in queries], update_vocab=False, return_as="ids", show_progress=False,
                                 allow_empty=False)
        n_terms = np.fromiter(map(len, ids), dtype=np.int64, count=q)
        terms = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(n_terms.sum()))
        term_ptr = np.concatenate([[0], np.cumsum(n_terms)]).astype(np.int64)
        ex = [_in_range(exclude[r] if exclude else (), self.n) for r in range(q)]
        ex_ptr = np.concatenate([[0], np.cumsum([e.size for e in ex], dtype=np.int64)]).astype(np.int64)
        ex_docs = np.concatenate(ex) if q else np.zeros(0, np.int64)
        s = self._index.scores
        indptr, indices, data = (np.ascontiguousarray(s["indptr"], dtype=np.int64), s["indices"], s["data"])
        cap = max(bm25_kernel.CANDIDATES_PER_K * kk, kk + 1)
        key = np.empty((min(q, QUERIES_PER_CALL), cap), dtype=np.uint64)
        positive = np.zeros(q, dtype=np.int64)
        for b0 in range(0, q, QUERIES_PER_CALL):
            b1 = min(q, b0 + QUERIES_PER_CALL)
            block = key[: b1 - b0]
            bm25_kernel.candidates(indptr, indices, data, self.n, terms, term_ptr[b0: b1 + 1], ex_docs,
                                   ex_ptr[b0: b1 + 1], kk, bm25_kernel.TILE_DOCS, bm25_kernel.GROUP, block, positive[b0:b1])
            # the kk smallest keys of each row, sorted: score descending, ties by document (numpy's SIMD sorts)
            block.partition(kk - 1, axis=1)
            top = np.sort(block[:, :kk], axis=1)
            bm25_kernel.decode(top, out_s[b0:b1], out_i[b0:b1])
            if progress:
                progress(b1 - b0)
        short = positive < kk
        for r in np.flatnonzero(short).tolist():  # fewer positive scores than kk: rank the matching documents
            scores = self._index.get_scores_from_ids(ids[r]) if ids[r] else np.zeros(self.n, dtype=np.float32)
            si, ii = bm25_topk(scores, kk, ex[r], self._postings(ids[r]))
            out_s[r, : len(si)], out_i[r, : len(ii)] = si, ii
            out_s[r, len(si):], out_i[r, len(ii):] = -np.inf, PAD_INDEX
        return out_s, out_i


def _in_range(exclude: Collection[int], n: int) -> np.ndarray:
    """The distinct documents of ``exclude`` in ``[0, n)``, ascending (int64)."""
    if not len(exclude):
        return np.zeros(0, np.int64)
    e = np.unique(np.fromiter((int(x) for x in exclude), dtype=np.int64))
    return e[(e >= 0) & (e < n)]


def _ranked(values: np.ndarray, indices: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``m`` of the positive ``values`` (at ascending ``indices``) by (value descending, index ascending),
    as ``(float64 values, int64 indices)``: partition at the m-th largest value, then sort what reaches it."""
    if values.size > m:
        keep = np.flatnonzero(values >= np.partition(values, values.size - m)[values.size - m])
        values, indices = values[keep], indices[keep]
    if values.dtype == np.float32 and indices.size and indices[-1] <= 0xFFFFFFFF:
        # positive float32 bit patterns order as the values: one int64 sort of (~bits, index) ranks both keys
        key = (np.uint64(0xFFFFFFFF) - values.view(np.uint32).astype(np.uint64)) << np.uint64(32) | indices.astype(np.uint64)
        key.sort()
        key = key[:m]
        bits = (np.uint64(0xFFFFFFFF) - (key >> np.uint64(32))).astype(np.uint32)
        return bits.view(np.float32).astype(np.float64), (key & np.uint64(0xFFFFFFFF)).astype(np.int64)
    order = np.argsort(-values, kind="stable")[:m]  # stable: ties stay in index order
    return values[order].astype(np.float64), indices[order].astype(np.int64)


def bm25_topk(scores: np.ndarray, k: int, exclude: Collection[int] = (),
              matched: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The top-k of one ``(n,)`` BM25 score vector over the documents that share a term with the query: score
    descending, ties by lower index, ``exclude`` left out; fewer than ``k`` when fewer documents match.

    Args:
        matched: the matching documents (ascending indices, :meth:`BM25.matched`); None: those with a positive score
            (the same set under ``lucene``, whose scores are positive exactly where a term matches).

    Returns:
        ``(float64 scores, int64 indices)``, the order of :func:`~mmir.retrieval.topk.topk_scores` on those documents.
    """
    s = np.asarray(scores)
    cand = np.flatnonzero(s > 0) if matched is None else np.asarray(matched, dtype=np.int64)
    if len(exclude):
        cand = cand[~np.isin(cand, np.fromiter((int(x) for x in exclude), dtype=np.int64))]
    m = min(k, cand.size)
    if m <= 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    vals = s[cand]
    if matched is None or (vals > 0).all():  # positive scores: the partition and the one-key sort of _ranked
        return _ranked(vals, cand, m)
    top_s, top_i = topk_scores(vals, m)  # robertson's negative idf, bm25l/bm25+'s shifted scores
    return top_s, cand[top_i]
