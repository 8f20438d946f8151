"""The papers this artifact reproduces, as the pipeline finds them.

Each entry is a paper's evidence package (:mod:`aoi_fl.evidence`), which declares, in its
``__init__``, ``KEY`` and ``TITLE`` (its ledger key and title), ``METHOD`` (the method package
it reproduces, whose own ``REGISTERS`` modules register its samplers and algorithms when
imported), ``REGISTERS`` (its modules that register plot styles and families) and ``CLAIMS``
(the module whose ``claims(profile, ...)`` and ``UNTESTED`` feed the ledger).
:mod:`aoi_fl.pipeline.plugins` reads this list by name, so the shared layers never import a paper;
another package joins through the ``aoi_fl.papers`` entry-point group (see README, "Adding a
policy").
"""

#: the selection arena (ours) is a package of the same shape: its policies register
#: and its findings enter the ledger, marked as ours
PAPERS: tuple[str, ...] = (
    "aoi_fl.evidence.aoi",
    "aoi_fl.evidence.agnostic",
    "aoi_fl.evidence.kvib",
    "aoi_fl.evidence.fedsum",
    "aoi_fl.evidence.arena",
)
