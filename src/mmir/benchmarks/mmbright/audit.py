"""The quality audit of MM-BRIGHT §3 ("automatic quality audit using GPT-4o as an LLM judge"; full prompt and
per-domain results in the paper's Appendix F): each query with its positive documents rated on four 1-5 Likert
criteria (:data:`CRITERIA`), then per-domain means with Student-t intervals and the dataset mean.

* The judge is an LLM through :class:`~mmir.llm.client.LLMClient` (generation cache, the versioned prompt file
  ``prompts/audit_v1.txt``, a named parser of :data:`AUDIT_PARSERS`). A call that failed, or a reply missing a
  criterion or rating one outside 1-5, leaves the query **unrated** (status ``failed`` / ``rejected``, counted and
  retried on the next run): never a default or clipped score.
* The paper's Appendix F prompt is not in the text this project holds (``../shared/seeds/mm-bright.txt`` stops at
  Appendix E), so ``audit_v1`` states the four criteria in the words of §3. The judge sees the query text and the
  documents' text (a text-only judge; query images are not shown).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mmir.config.models.audit import AuditConfig
from mmir.llm.client import LLMClient
from mmir.llm.parsers import Parsed, ReplyParser
from mmir.llm.prompts import PromptTemplate

log = logging.getLogger(__name__)

#: The four criteria (paper §3): key -> display name, in table order.
CRITERIA = {"readability": "Readability", "clarity": "Clarity", "evidence_usefulness": "Evidence usefulness",
            "evidence_sufficiency": "Evidence sufficiency"}

#: The paper's dataset averages (MM-BRIGHT §3, GPT-4o judge, all 29 domains); ``expected/mm-bright-paper.yaml`` holds
#: the same four values for the reproduction check (a test keeps them equal).
PAPER_AVERAGES = {"readability": 4.47, "clarity": 4.18, "evidence_usefulness": 3.80, "evidence_sufficiency": 4.10}

#: The Likert scale of every criterion.
LOW, HIGH = 1, 5

#: Columns of a domain's ratings file (one row per rated query; criteria empty unless status is ``ok``).
RATING_COLUMNS = ["qid", "status", "positives", "shown", *CRITERIA, "error"]

#: Spellings of each criterion a reply may use (compared after lower-casing and joining words with ``_``).
_ALIASES = {"readability": "readability", "clarity": "clarity", "evidence_usefulness": "evidence_usefulness",
            "usefulness": "evidence_usefulness", "evidence_sufficiency": "evidence_sufficiency",
            "sufficiency": "evidence_sufficiency"}


# ------------------------------------------------------------------------------------------------ parsers
def _criterion(name: str) -> str | None:
    return _ALIASES.get(re.sub(r"[\s_-]+", "_", name.strip().strip("*_`\"'").strip().lower()))


def _rating(value: object, scale: str | None = None) -> tuple[int | None, str | None]:
    """``(rating, None)`` for an integer in [LOW, HIGH] (``4``, ``4.0``, ``"4"``), else ``(None, why)``."""
    if scale is not None and int(scale) != HIGH:
        return None, f"rated on a 1-{scale} scale"
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, f"{value!r} is not a number"
    if value != int(value):
        return None, f"{value:g} is not an integer"
    if not LOW <= value <= HIGH:
        return None, f"{value:g} is outside {LOW}-{HIGH}"
    return int(value), None


def _complete(found: dict[str, int], bad: list[str], method: str) -> Parsed:
    if bad:
        return Parsed(None, False, None, "; ".join(bad))
    missing = [CRITERIA[c] for c in CRITERIA if c not in found]
    if missing:
        return Parsed(None, False, None, f"no rating for {', '.join(missing)}")
    return Parsed({c: found[c] for c in CRITERIA}, True, method)


def _from_json(text: str) -> Parsed | None:
    """The first JSON object of ``text`` naming a criterion (one level of nesting, ``{"score": n}`` values read)."""
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        inner = [v for v in obj.values() if isinstance(v, dict)]
        for cand in (obj, *inner):
            named = {_criterion(str(k)): v for k, v in cand.items() if _criterion(str(k))}
            if not named:
                continue
            found, bad = {}, []
            for c, v in named.items():
                if isinstance(v, dict):
                    v = next((v[k] for k in ("score", "rating", "value") if k in v), v)
                r, why = _rating(v)
                if r is None:
                    bad.append(f"{CRITERIA[c]}: {why}")
                else:
                    found[c] = r
            return _complete(found, bad, "json")
    return None


_PAIR = re.compile(r"(?<![A-Za-z])[*_\"']*(readability|clarity|evidence[\s_-]*usefulness|usefulness|evidence[\s_-]*sufficiency|"
                   r"sufficiency)[*_\"']*\s*(?:\([^)]*\))?[*_\s]*[:=][*_\s]*(-?\d+(?:\.\d+)?)\s*\**\s*(?:/\s*(\d+))?", re.I)


def _from_pairs(text: str) -> Parsed | None:
    """Every ``<criterion>: <n>`` in the text (lines such as ``**Clarity**: 4/5``, or the pairs of a malformed JSON
    object); one criterion rated twice differently is a conflict."""
    found, bad = {}, []
    for m in _PAIR.finditer(text):
        c = _criterion(m.group(1))
        r, why = _rating(m.group(2), m.group(3))
        if r is None:
            bad.append(f"{CRITERIA[c]}: {why}")
        elif c in found and found[c] != r:
            bad.append(f"{CRITERIA[c]} rated {found[c]} and {r}")
        else:
            found[c] = r
    return _complete(found, bad, "pairs") if found or bad else None


def _parse_lenient(text: str) -> Parsed:
    return _from_json(text) or _from_pairs(text) or Parsed(None, False, None, "no criterion rating in the reply")


def _parse_json(text: str) -> Parsed:
    return _from_json(text) or Parsed(None, False, None, "no JSON object naming a criterion in the reply")


#: A JSON object of the four criteria, else ``<criterion>: <n>`` pairs; value ``{criterion key: 1..5}``.
AUDIT_LIKERT = ReplyParser("audit_likert", "MM-BRIGHT §3 quality audit (four 1-5 Likert criteria; JSON or '<criterion>: <n>' pairs)",
                           _parse_lenient)
#: The JSON object only.
AUDIT_LIKERT_JSON = ReplyParser("audit_likert_json", "MM-BRIGHT §3 quality audit (four 1-5 Likert criteria; JSON only)",
                                _parse_json)
#: The parsers ``audit.parser`` names.
AUDIT_PARSERS = {p.name: p for p in (AUDIT_LIKERT, AUDIT_LIKERT_JSON)}


# --------------------------------------------------------------------------------------------- the inputs
def _cut(text: str, chars: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[:chars].rstrip() + " ..."


def select_queries(topics: pd.DataFrame, positives: Mapping[str, Sequence[str]], max_queries: int) -> pd.DataFrame:
    """The topics to rate: those with at least one positive document, in file order, the first ``max_queries``
    (0 = all)."""
    has = topics[[bool(positives.get(q)) for q in topics["qid"]]]
    return has if not max_queries else has.head(max_queries)


def audit_fields(query: str, doc_ids: Sequence[str], corpus: Mapping[str, str], cfg: AuditConfig) -> dict[str, object]:
    """The prompt fields of one query: ``query`` (cut at ``query_chars``), ``documents`` (the first
    ``max_documents`` positives, each ``[Passage i] <id>`` and its text cut at ``document_chars``), ``shown``,
    ``positives`` (counts)."""
    shown = list(doc_ids)[: cfg.max_documents]
    docs = "\n\n".join(f"[Passage {i}] {d}\n{_cut(corpus[d], cfg.document_chars)}" for i, d in enumerate(shown, 1))
    return {"query": _cut(query, cfg.query_chars), "documents": docs, "shown": len(shown), "positives": len(doc_ids)}


def rate(topics: pd.DataFrame, positives: Mapping[str, Sequence[str]], corpus: Mapping[str, str], client: LLMClient,
         prompt: PromptTemplate, parser: ReplyParser, cfg: AuditConfig) -> tuple[pd.DataFrame, dict]:
    """Rate each query of ``topics`` (already :func:`select_queries`) with ``client``: one call per query.

    Args:
        topics: ``qid, query``.
        positives: qid -> its positive document ids (every id a key of ``corpus``).
        corpus: document id -> text.
        prompt: the template (fields ``query, documents, shown, positives``).
        parser: one of :data:`AUDIT_PARSERS`.
        cfg: ``max_documents``, ``document_chars``, ``query_chars``, ``temperature``, ``max_tokens``, ``seed``.

    Returns:
        ``(frame, counts)``: frame with :data:`RATING_COLUMNS` (criteria as nullable integers, empty unless the
        status is ``ok``); counts ``queries``, ``rated``, ``failed`` (no reply), ``rejected`` (reply unusable),
        ``documents_cut`` (positives not shown, summed over the queries).
    """
    fields = [audit_fields(q, positives[qid], corpus, cfg) for qid, q in zip(topics["qid"], topics["query"])]
    msgs = [[{"role": "user", "content": prompt.render(**f)}] for f in fields]
    recs = client.call_many(msgs, prompt, label="audit", parser=parser, contexts=[{"qid": q} for q in topics["qid"]],
                            temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=cfg.seed)
    rows = []
    for qid, f, r in zip(topics["qid"], fields, recs):
        ratings = r.value if r.ok else {}
        rows.append({"qid": qid, "status": r.status, "positives": f["positives"], "shown": f["shown"],
                     **{c: ratings.get(c) for c in CRITERIA}, "error": "" if r.ok else " ".join(str(r.error).split())})
    frame = pd.DataFrame(rows, columns=RATING_COLUMNS).astype({c: "Int64" for c in CRITERIA})
    counts = {"queries": len(frame), "rated": int((frame["status"] == "ok").sum()),
              "failed": int((frame["status"] == "failed").sum()), "rejected": int((frame["status"] == "rejected").sum()),
              "documents_cut": int(sum(f["positives"] - f["shown"] for f in fields))}
    bad = [r for r in recs if not r.ok]
    if bad:
        log.warning("%d of %d audit calls gave no usable rating (left unrated, retried on the next run); e.g. %s", len(bad),
                    len(recs), bad[0].error)
    return frame, counts


# ------------------------------------------------------------------------------------------- aggregation
#: The pooled row of each dataset in :func:`aggregate`.
ALL = "All"

#: Columns of :func:`aggregate`.
SUMMARY_COLUMNS = ["dataset", "domain", "criterion", "n", "mean", "sd", "ci_low", "ci_high", "queries", "failed", "rejected"]


def t_interval(values: Sequence[float], confidence: float) -> tuple[float, float, float, float]:
    """``(mean, sd, low, high)`` of ``values``: the Student-t interval ``mean ± t_{(1+c)/2, n-1} · sd / √n`` (``sd``
    with ``n - 1``). ``n = 1``: the interval is NaN; ``n = 0``: all NaN."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return (math.nan,) * 4
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, math.nan, math.nan
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def aggregate(ratings: Mapping[tuple[str, str], pd.DataFrame], confidence: float) -> pd.DataFrame:
    """Per (dataset, domain) and per dataset pooled over its domains (domain :data:`ALL`, the dataset mean: every
    rated query counts once): each criterion's ``n`` (rated queries), mean, ``sd`` and the Student-t interval at
    ``confidence`` (:func:`t_interval`), with the unit's ``queries`` and its ``failed`` / ``rejected`` calls.

    Args:
        ratings: ``{(dataset, domain): ratings frame}`` (:data:`RATING_COLUMNS`).

    Returns:
        Columns :data:`SUMMARY_COLUMNS`, domains in input order, then each dataset's :data:`ALL` rows.
    """
    rows = []

    def add(ds: str, dom: str, frame: pd.DataFrame) -> None:
        ok = frame[frame["status"] == "ok"]
        counts = {"queries": len(frame), "failed": int((frame["status"] == "failed").sum()),
                  "rejected": int((frame["status"] == "rejected").sum())}
        for c in CRITERIA:
            v = ok[c].dropna().astype(float).to_numpy()
            mean, sd, lo, hi = t_interval(v, confidence)
            rows.append({"dataset": ds, "domain": dom, "criterion": c, "n": len(v), "mean": mean, "sd": sd, "ci_low": lo,
                         "ci_high": hi, **counts})

    datasets: dict[str, list[pd.DataFrame]] = {}
    for (ds, dom), frame in ratings.items():
        add(ds, dom, frame)
        datasets.setdefault(ds, []).append(frame)
    for ds, frames in datasets.items():
        add(ds, ALL, pd.concat(frames, ignore_index=True))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
