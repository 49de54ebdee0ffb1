"""``mteb``: MTEB result files out (after scoring) and in (reference rows of the task tables)."""

from __future__ import annotations

from pydantic import Field

from mmir.config.models.base import Name, Section, SystemName


class MTEBReference(Section):
    """MTEB result files shown as reference rows ("published in MTEB results") in the task tables."""

    path: str = Field(description="one MTEB result file (<task name>.json), a results folder (<model>/<revision>/<task name>.json) "
                      "or an MTEB cache holding results/ (relative to the project directory)")
    dataset: Name = Field(description="the dataset (a key of datasets) whose task tables show these rows; the files' hf_subsets "
                          "are its domains")


class MTEBConfig(Section):
    """The MTEB result files of this run (mmir.reporting.mteb_export) and the published ones read into the task tables
    (mmir.reporting.mteb_reference)."""

    export: bool = Field(False, description="after scoring, write results/mteb/results/<model>/<revision>/<task name>.json for "
                         "every (system, task), in the layout mteb's loaders read (true: the mteb stage runs)")
    names: dict[SystemName, str] = Field({}, description="{system: the model name its MTEB files are written under}; a system "
                                         "not listed takes its hub id, or mmir/<system> (docs: Your own system)")
    references: list[MTEBReference] = Field([], description="MTEB result files read with mteb's loader (needs mmir[mteb]) into "
                                            "the task tables as rows labelled 'published in MTEB results'; never tested")
