"""BM25 checked against rank_bm25 on the same tokens, and the Lucene variant against its formula by hand."""

import math

import numpy as np
from rank_bm25 import BM25Okapi

from mmir.retrieval.bm25 import BM25, bm25_topk, make_tokenizer
from mmir.retrieval.topk import topk_scores

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a fast brown fox and a sleepy cat",
    "statistics: the mean and median of samples",
    "the derivative of a function measures its rate of change",
    "integration gives the area under the curve of a function",
    "foxes are mammals; dogs are mammals too",
    "histogram bins count the frequency of observations",
    "sample variance and standard deviation measure spread",
]
QUERIES = ["brown fox", "rate of change of a function", "median of a sample", "mammals dogs", "spread of samples"]


def test_robertson_equals_rank_bm25_okapi_on_same_tokens():
    tok = make_tokenizer("en", "english")
    tokens = tok(CORPUS)
    df = {}
    for t in tokens:
        for w in set(t):
            df[w] = df.get(w, 0) + 1
    assert max(df.values()) <= len(CORPUS) / 2  # no epsilon-floored idf, so the two formulas agree
    ref = BM25Okapi(tokens, k1=1.2, b=0.75)
    ours = BM25(CORPUS, method="robertson", k1=1.2, b=0.75)
    for q in QUERIES:
        expected = ref.get_scores(tok([q])[0])
        got = ours.get_scores(q)
        # bm25s leaves out the constant (k1 + 1) numerator factor: same ranking, scaled scores
        np.testing.assert_allclose(got * (1.2 + 1), expected, rtol=1e-5, atol=1e-6)
        assert list(topk_scores(got, 5)[1]) == list(topk_scores(expected, 5)[1])


def test_rank_bm25_backend_is_the_reference():
    tok = make_tokenizer("en", "english")
    ours = BM25(CORPUS, backend="rank_bm25", k1=0.9, b=0.4)
    ref = BM25Okapi(tok(CORPUS), k1=0.9, b=0.4)
    np.testing.assert_allclose(ours.get_scores("brown fox"), ref.get_scores(tok(["brown fox"])[0]))


def test_lucene_variant_by_hand():
    k1, b = 0.9, 0.4
    tok = make_tokenizer(None, None)
    tokens = tok(CORPUS)
    n, avgdl = len(tokens), sum(map(len, tokens)) / len(tokens)
    ours = BM25(CORPUS, method="lucene", k1=k1, b=b, stopwords=None, stemmer=None)
    q = "the function of a fox"
    expected = np.zeros(n)
    for w in set(tok([q])[0]):
        df = sum(w in t for t in tokens)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, t in enumerate(tokens):
            tf = t.count(w)
            expected[i] += idf * tf / (tf + k1 * (1 - b + b * len(t) / avgdl))
    np.testing.assert_allclose(ours.get_scores(q), expected, rtol=1e-5)


def test_query_of_stopwords_only_scores_zero():
    assert not BM25(CORPUS).get_scores("the and of").any()


def test_topk_scores_ties_exclusions_and_short_corpus():
    s = np.array([1.0, 3.0, 3.0, 2.0, 3.0, 0.5])
    sc, idx = topk_scores(s, 3)
    assert idx.tolist() == [1, 2, 4] and sc.tolist() == [3.0, 3.0, 3.0]
    _, idx = topk_scores(s, 2, exclude=[2])
    assert idx.tolist() == [1, 4]
    _, idx = topk_scores(s, 10, exclude=[0, 5])
    assert idx.tolist() == [1, 2, 4, 3]
    rng = np.random.default_rng(0)
    r = rng.integers(0, 5, size=500).astype(float)  # many ties
    _, idx = topk_scores(r, 50, exclude=[3, 7])
    ref = [i for i in sorted(range(500), key=lambda i: (-r[i], i)) if i not in (3, 7)][:50]
    assert idx.tolist() == ref


def _today(corpus, queries, method, stopwords, stemmer):
    """The implementation before the chunked id-based index: bm25s over token strings (return_ids=False)."""
    import bm25s

    tok = make_tokenizer(stopwords, stemmer)
    index = bm25s.BM25(method=method, k1=0.9, b=0.4)
    index.index(tok(corpus), show_progress=False)
    return [np.asarray(index.get_scores(t)) if t else np.zeros(len(corpus), np.float32) for t in tok(queries)]


def test_chunked_id_index_scores_equal_the_token_string_index_exactly():
    import pytest

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(200)] + ["running", "runs", "ran", "the", "and", "of", "a", "foxes"]
    corpus = CORPUS + [" ".join(rng.choice(words, size=rng.integers(0, 50))) for _ in range(300)]
    corpus += ["", "the and of", "x", " ".join(["w1"] * 5000)]  # empty, stopwords only, no token, a long one
    queries = QUERIES + [" ".join(rng.choice(words, size=6)) for _ in range(20)] + ["the", "zzz qq", "runs w1 w1"]
    for stopwords, stemmer in (("en", "english"), (None, None)):
        for method in ("lucene", "robertson", "atire", "bm25l", "bm25+"):
            ref = _today(corpus, queries, method, stopwords, stemmer)
            for chunk_docs in (1, 37, 10_000):
                ours = BM25(iter(corpus), method=method, k1=0.9, b=0.4, stopwords=stopwords, stemmer=stemmer,
                            chunk_docs=chunk_docs)  # any iterable, read once
                assert ours.n == len(corpus)
                for q, r, s in zip(queries, ref, ours.iter_scores(queries)):
                    assert s.dtype == r.dtype and np.array_equal(s, r), (method, stemmer, chunk_docs, q)
    with pytest.raises(ValueError, match="backend"):
        BM25(CORPUS, backend="nope")


def _whole_vector(s, k, exclude, matched):
    """The reference: the whole vector ranked (topk_scores) with every document outside ``matched`` excluded."""
    outside = np.setdiff1d(np.arange(s.size), matched)
    return topk_scores(s, k, set(outside.tolist()) | {int(x) for x in exclude})


def test_bm25_topk_ranks_only_the_matching_documents():
    """The sparse top-k of the retrieve step returns exactly what ranking the whole vector does once the documents
    that share no term with the query are left out: ties, exclusions, negative scores, fewer matches than k. No
    zero-scored document pads a run (issue 38: padding in corpus order made R@100 depend on the file's line order)."""
    rng = np.random.default_rng(0)
    vectors = []
    for n in (1, 7, 50, 400):
        base = rng.choice([0.0, 0.0, 0.0, 1.5, 2.0, 2.0, 3.25], size=n).astype(np.float32)  # mostly zeros, ties
        vectors += [base, base - np.float32(1.0), np.zeros(n, np.float32), -np.abs(base), base.astype(np.float64)]
    for method in ("lucene", "robertson", "bm25+"):
        index = BM25(CORPUS * 3, method=method)
        vectors += list(index.iter_scores(QUERIES + ["unknownword", "the of a"]))
    for s in vectors:
        for matched in (None, np.flatnonzero(s != 0), np.sort(rng.choice(s.size, size=(s.size + 1) // 2, replace=False))):
            for k in (1, 3, 10, 1000):
                for exclude in ((), (0,), [2, 2, 5, 999, -1], {1, 3}, np.arange(0, s.size, 2)):
                    want_s, want_i = _whole_vector(s, k, exclude, np.flatnonzero(s > 0) if matched is None else matched)
                    got_s, got_i = bm25_topk(s, k, exclude, matched)
                    assert got_s.dtype == want_s.dtype == np.float64 and got_i.dtype == want_i.dtype == np.int64
                    assert got_i.tolist() == want_i.tolist() and got_s.tobytes() == want_s.tobytes(), (s, k, exclude)


def test_matched_documents_are_those_sharing_a_token_with_the_query():
    docs = CORPUS * 2 + ["", "the and of"]
    for backend in ("bm25s", "rank_bm25"):
        index = BM25(docs, backend=backend)
        tokens = [set(t) for t in index.tokenize(docs)]
        for q in QUERIES + ["unknownword", "the of a", ""]:
            qt = set(index.tokenize([q])[0])
            assert index.matched(q).tolist() == [i for i, t in enumerate(tokens) if t & qt], (backend, q)
        s, i = index.topk(["fox"], 1000)
        assert (i[0] >= 0).sum() == len(index.matched("fox")) < len(docs)  # the rest is padding, dropped from the run


def test_batched_topk_equals_the_per_query_path_on_a_vaswani_slice(monkeypatch):
    """BM25.topk (the numba kernel, the retrieve path) returns byte for byte what the per-query path returns and what
    ranking bm25s's whole score vector over the matching documents returns: real abstracts with tied scores,
    exclusions, k above the documents with a term (the run is shorter), terms that score 0 (robertson's idf is floored
    at 0 for a term in over half the documents: "the" without stopwords), bm25+ (query by query), several kernel
    calls, tiles and thresholds."""
    import mmir.retrieval.bm25 as bm25_module
    import mmir.retrieval.bm25_kernel as bm25_kernel
    from mmir.data.trec import read_trec_documents, read_trec_topics
    from tests.conftest import shared

    root = shared("vaswani") / "trec"
    docs = [t for _, t in read_trec_documents(root / "corpus")][:3000]
    topics = [t for _, t in read_trec_topics(root / "query-text.trec")]
    queries = topics + ["", "the of and", "zzzunknown", "cell cell cell", "the measurement of the field"]
    rng = np.random.default_rng(0)
    exclude = [set(rng.integers(-3, 3005, size=rng.integers(0, 400)).tolist()) if r % 4 == 1 else set()
               for r in range(len(queries))]
    seen_ties = seen_short = seen_zero_term = False
    for stopwords, method in (("en", "lucene"), (None, "robertson"), ("en", "bm25+")):
        index = BM25(docs, method=method, stopwords=stopwords)
        vectors = list(index.iter_scores(queries))  # bm25s's get_scores_from_ids, query by query
        seen_zero_term |= method == "robertson" and not vectors[len(topics) + 1].any()  # "the of and": all 0
        for k in (1, 10, 1000, 3000, 5000):
            # the kernel: 7 queries a call in groups of 3, 64-document tiles (postings cross many tiles), a candidate
            # buffer of k + 1 (the threshold rises at every other candidate); then the defaults
            for calls, tile, per_k, group in ((7, 64, 1, 3), (256, bm25_kernel.TILE_DOCS, bm25_kernel.CANDIDATES_PER_K, 8)):
                monkeypatch.setattr(bm25_module, "QUERIES_PER_CALL", calls)
                monkeypatch.setattr(bm25_kernel, "TILE_DOCS", tile)
                monkeypatch.setattr(bm25_kernel, "CANDIDATES_PER_K", per_k)
                monkeypatch.setattr(bm25_kernel, "GROUP", group)
                for ex in (None, exclude):
                    got_s, got_i = index.topk(queries, k, ex)
                    kk = min(k, len(docs))
                    assert got_s.shape == got_i.shape == (len(queries), kk)
                    assert got_s.dtype == np.float64 and got_i.dtype == np.int64
                    for r, v in enumerate(vectors):
                        matched = index.matched(queries[r])
                        want_s, want_i = _whole_vector(v, kk, ex[r] if ex else (), matched)
                        assert bm25_topk(v, kk, ex[r] if ex else (), matched)[1].tolist() == want_i.tolist()
                        m = len(want_i)
                        assert got_s[r, :m].tobytes() == want_s.tobytes(), (method, k, r)
                        assert got_i[r, :m].tolist() == want_i.tolist(), (method, k, r)
                        assert np.isneginf(got_s[r, m:]).all() and (got_i[r, m:] == -1).all()
                        seen_ties |= bool((np.diff(want_s[(want_s > 0)]) == 0).any())
                        seen_short |= bool(m < kk)
    assert seen_ties and seen_short and seen_zero_term  # the cases the batched path treats apart all occurred


# Arabic with diacritics (harakat, Unicode category Mn): bm25s's default pattern (?u)\b\w\w+\b stops a word at each
# mark and drops the 1-letter pieces, so "كَتَبَ" (wrote) has no token at all; a pattern that takes the marks into the
# word keeps it whole and the Snowball Arabic stemmer then removes them. "ﻻ" is a presentation form NFKC folds to "لا".
AR_DOCS = ["كَتَبَ الطَّالِبُ الدَّرْسَ فِي الْمَدْرَسَةِ", "ذَهَبَ الْوَلَدُ إِلَى السُّوقِ", "الطالب يقرأ الكتاب في المكتبة",
           "ﻻ يوجد درس اليوم", "السوق مغلق"]
AR_QUERIES = ["الطالب", "كتب الدرس", "لا سوق", "ذَهَبَ"]
AR_PATTERN = r"(?u)[\w\u0610-\u061A\u064B-\u065F\u0670]{2,}"
AR_STOPWORDS = ["في", "إلى", "الي"]


def test_a_configured_tokenizer_keeps_arabic_words_whole_and_equals_bm25s_called_directly():
    import unicodedata

    import bm25s
    import Stemmer

    default = make_tokenizer(None, None)
    assert default(["كَتَبَ الطَّالِبُ"]) == [["الط", "ال"]]  # the default splits and drops
    settings = dict(token_pattern=AR_PATTERN, unicode_normalization="NFKC")
    tok = make_tokenizer(AR_STOPWORDS, "arabic", **settings)
    # stopwords are matched before stemming: the plain "في" (in) goes, the vowelled "فِي" stays
    assert tok(["كَتَبَ الطَّالِبُ فِي في", "ﻻ"]) == [["كتب", "طالب", "في"], ["لا"]]
    # the reference: bm25s itself on the NFKC texts, with the same pattern, stopwords and PyStemmer's arabic
    stem = Stemmer.Stemmer("arabic").stemWords

    def ref_tokens(texts):
        return bm25s.tokenize([unicodedata.normalize("NFKC", t) for t in texts], token_pattern=AR_PATTERN,
                              stopwords=AR_STOPWORDS, stemmer=stem, return_ids=False, show_progress=False)

    ref = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    ref.index(ref_tokens(AR_DOCS), show_progress=False)
    for backend in ("bm25s", "rank_bm25"):
        ours = BM25(AR_DOCS, backend=backend, k1=0.9, b=0.4, stopwords=AR_STOPWORDS, stemmer="arabic", **settings)
        assert ours.tokenize(AR_DOCS) == ref_tokens(AR_DOCS)
        if backend == "bm25s":
            for q, got in zip(AR_QUERIES, ours.iter_scores(AR_QUERIES)):
                assert np.array_equal(got, np.asarray(ref.get_scores(ref_tokens([q])[0]))), q
            s, i = ours.topk(AR_QUERIES, 3)
            assert set(i[0][:2].tolist()) == {0, 2}  # "the student" finds the vowelled document too
    plain = BM25(AR_DOCS, stopwords=None, stemmer=None)
    assert plain.get_scores("الطالب")[0] == 0  # the default tokens of document 0 never match the word


def test_tokenizer_settings_are_checked_and_recorded_in_the_lineage():
    import pytest

    from mmir.config.models import BM25System, parse_system
    from mmir.core.errors import ConfigError
    from mmir.reporting.lineage import systems_lineage

    with pytest.raises(ValueError, match="arabc.*arabic"):
        make_tokenizer(None, "arabc")
    for bad in ("(?u)(\\w+)", "[unclosed"):
        with pytest.raises(ConfigError, match="token_pattern"):
            parse_system({"kind": "bm25", "token_pattern": bad}, "systems.bm25")
    s = BM25System(kind="bm25", token_pattern=AR_PATTERN, stemmer="arabic", stopwords=AR_STOPWORDS, unicode_normalization="NFKC")
    model = systems_lineage({"ar": s, "bm25": BM25System(kind="bm25")})
    assert model[0]["model"] == (f"BM25 lucene (k1 0.9, b 0.4); tokenizer: Unicode NFKC, lowercased, tokens /{AR_PATTERN}/, "
                                 "stopwords 3 words given, stemmer arabic")
    assert model[1]["model"].endswith("tokenizer: Unicode not normalised, lowercased, tokens /(?u)\\b\\w\\w+\\b/, stopwords en, "
                                      "stemmer english")
