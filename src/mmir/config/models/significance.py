"""``significance``: intervals and paired tests in every table (mmir.evaluation.significance)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mmir.config.models.base import Number, Section


class SignificanceConfig(Section):
    """Each cell's confidence interval, and a paired test of each system against the baseline on the same queries (the
    Avg. column stratified by domain), corrected for multiple comparisons; a marker where the corrected p < alpha.
    Seeds are per cell (seed + the cell's name)."""

    baseline: str | None = Field(None, description="system (RAG: setting, or topk:<system>) tested against; a task table "
                                 "without that row, and null, use bm25 where the table has it, else its first row (rows by "
                                 "kind: bm25, dense, multivector, mm; then by name); RAG null: the first setting")
    test: Literal["permutation", "bootstrap"] = Field("permutation", description="paired randomization (sign flips) or paired "
                                                      "bootstrap (shift method)")
    correction: Literal["holm", "bh", "none"] = Field("holm", description="Holm (family-wise) or Benjamini-Hochberg (false "
                                                      "discovery rate)")
    alpha: Number = Field(0.05, gt=0, lt=1, description="significance level of the markers (corrected p < alpha)")
    resamples: int = Field(10000, ge=1, description="random sign patterns / bootstrap resamples per test and interval")
    seed: int = Field(0, description="base seed of every cell's draws")
    confidence: Number = Field(0.95, gt=0, lt=1, description="level of the intervals")
    interval: Literal["percentile", "bca"] = Field("percentile", description="bootstrap interval; bca falls back to percentile "
                                                   "where undefined")
    family: Literal["column", "table"] = Field("column", description="what one correction covers: the comparisons of one column, "
                                               "or of the whole table")
    repeats: Literal["one", "all"] = Field("one", description="judged scores (RAG): per resampled answer draw one of its judgings "
                                           "(one) or resample its judgings (all: the plain two-stage bootstrap)")

    @classmethod
    def from_config(cls, section: dict | None) -> SignificanceConfig:
        """The ``significance`` section (or params slice); ``None`` = every default.

        Raises:
            ConfigError: naming ``significance.<key>``.
        """
        from mmir.config.parse import parse

        return parse(cls, section or {}, "significance")

    def as_dict(self) -> dict:
        """The settings as recorded in results/tables/<task>.significance.json (field order kept)."""
        return self.model_dump()

    def describe_test(self) -> str:
        """One phrase naming the test, e.g. for a table footnote."""
        return ("two-sided paired randomization test (sign flips of the per-query differences)" if self.test == "permutation"
                else "two-sided paired bootstrap test (shift method)")

    def describe_correction(self) -> str:
        """``Holm-corrected``, ``Benjamini-Hochberg-corrected`` or ``uncorrected``."""
        return {"holm": "Holm-corrected", "bh": "Benjamini-Hochberg-corrected", "none": "uncorrected"}[self.correction]
