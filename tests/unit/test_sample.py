"""``datasets.<name>.sample``: the first N queries and a pooled corpus, checked against the full load of the same
domain (real openstax and Vaswani data)."""

import pytest
from conftest import shared
from pydantic import ValidationError

from mmir.core.errors import ConfigError
from mmir.data.prepare import prepare_domain
from mmir.data.sample import Sample

SAMPLE = {"queries": 3, "corpus": "judged", "distractors": 5, "seed": 0}


def test_openstax_sample_keeps_the_first_queries_their_judged_items_and_distractors():
    root = shared("openstax")
    ds = {"source": "local", "root": str(root), "integrity": {}}
    full = prepare_domain("openstax", ds, "statistics")
    samp = prepare_domain("openstax", ds | {"sample": SAMPLE}, "statistics")
    qids = list(full.topics["qid"])[:3]
    assert list(samp.topics["qid"]) == qids
    judged = {d for q in qids for d in [*full.qrels.get(q, {}), *full.excluded.get(q, [])]}
    kept = set(samp.corpus["doc_id"])
    assert judged <= kept and len(kept - judged) == 5
    assert samp.qrels == {q: full.qrels[q] for q in qids if q in full.qrels}
    t = full.mm.topics.set_index("qid")
    images = {p for q in qids for p in [*t.at[q, "positive_images"], *t.at[q, "negative_images"]]}
    assert images <= set(samp.mm.images["path"]) and len(set(samp.mm.images["path"]) - images) == 5
    for task in ("task3", "task4"):
        assert samp.mm.qrels[task] == {q: full.mm.qrels[task][q] for q in qids if q in full.mm.qrels[task]}
    assert samp.report["sample"]["queries_full"] == len(full.topics) and samp.report["sample"]["documents"] == len(kept)
    # the same sample twice: the same corpus (seeded distractors)
    assert list(prepare_domain("openstax", ds | {"sample": SAMPLE}, "statistics").corpus["doc_id"]) == list(samp.corpus["doc_id"])


def test_trec_sample_and_full_corpus_option():
    root = shared("vaswani") / "trec"
    ds = {"source": "trec", "root": str(root), "corpus": "corpus/doc-text.trec", "topics": "query-text.trec",
          "qrels": "qrels", "topic_field": "title", "integrity": {}}
    full = prepare_domain("vaswani", ds, "vaswani")
    samp = prepare_domain("vaswani", ds | {"sample": {"queries": 4, "corpus": "all"}}, "vaswani")
    assert list(samp.topics["qid"]) == list(full.topics["qid"])[:4] and len(samp.corpus) == len(full.corpus)
    pooled = prepare_domain("vaswani", ds | {"sample": SAMPLE}, "vaswani")
    gold = {d for q in list(full.topics["qid"])[:3] for d in full.qrels.get(q, {})}
    assert len(pooled.corpus) == len(gold) + 5


def test_describe_names_the_sample():
    assert Sample.from_config(None) is None
    assert Sample.from_config(SAMPLE).describe() == ("sample: first 3 queries per domain; corpus: the items they judge "
                                                     "+ 5 other items of each kind it holds (seed 0)")
    with pytest.raises(ValidationError, match="bogus"):
        Sample(**{"queries": 3, "bogus": 1})
    with pytest.raises(ConfigError) as exc:  # a config section names the key
        Sample.from_config({"queries": 3, "corpus": "some"})
    assert exc.value.key == "sample.corpus"
