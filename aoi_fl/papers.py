"""The papers this artifact reproduces, as the pipeline finds them.

Each entry is a package that declares, in its ``__init__``, ``REGISTERS`` (its modules that
register samplers, algorithms, styles and recorders when imported) and ``CLAIMS`` (the module
whose ``claims(profile, ...)`` and ``UNTESTED`` feed the ledger). :mod:`aoi_fl.pipeline.plugins`
reads this list by name, so the shared layers never import a paper; another package joins
through the ``aoi_fl.papers`` entry-point group (see README, "Adding a policy").
"""

#: the selection arena (ours) is a package of the same shape: its policies register
#: and its findings enter the ledger, marked as ours
PAPERS: tuple[str, ...] = (
    "aoi_fl.aoi",
    "aoi_fl.agnostic",
    "aoi_fl.kvib",
    "aoi_fl.fedsum",
    "aoi_fl.arena",
)
