"""Numbers the AoI paper prints, and the grids on which both its notebooks and its ledger rows
(:mod:`~aoi_fl.evidence.aoi.claims`) read it: one home, so the two cannot drift apart. Light to
import (no PyTorch), for the theory notebooks."""

#: Fig. 2's Sigma per policy, as printed in the paper's text
PAPER_SIGMA = {
    "random": 0.204,
    "probabilistic": 0.116,
    "markov_optimal": 0.055,
    "markov_nonoptimal": 0.061,
}
#: (n, m, m') on which Theorem 1 is checked: both of its cases, integer and fractional n/m
THEOREM1_GRID = (
    (100, 15, 10), (100, 15, 6), (100, 15, 5), (100, 15, 3), (100, 15, 1), (100, 20, 10),
    (100, 20, 4), (100, 20, 2), (100, 30, 5), (100, 30, 2), (97, 13, 10), (97, 13, 5),
    (1000, 150, 10), (10, 3, 1), (10, 10, 1),
)  # fmt: skip
#: Fig. 4's window sizes T (the paper's figure is not in our copy and its text names no range)
WINDOWS = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500)
