"""Each paper's reproduction, apart from its method.

``aoi_fl.<paper>`` holds what a user imports to use a policy or an algorithm (samplers,
algorithms, theory) and needs only :mod:`aoi_fl.core`; ``aoi_fl.evidence.<paper>`` holds what
reproduces the paper with it: the experiments' configurations, the results' tables, the ledger
rows (``claims.toml`` with their measures), the notebooks' checks and the figures. Evidence may
import any method and the pipeline; a method never imports evidence (import-linter contracts in
``pyproject.toml``).
"""
