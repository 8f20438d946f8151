"""The papers this artifact reproduces, as the ledger and the figures find them.

Each entry is a paper's evidence package (:mod:`aoi_fl.evidence`), which declares, in its
``__init__``, ``KEY`` and ``TITLE`` (its ledger key and title), ``REGISTERS`` (its modules that
register plot styles and families) and ``CLAIMS`` (the module whose ``claims(profile, ...)`` and
``UNTESTED`` feed the ledger); the ledger's rows follow this order. The methods' samplers and
algorithms are entry points (``aoi_fl/entry_points.txt``), not listed here.
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
