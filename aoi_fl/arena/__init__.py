"""The selection arena (ours, not the papers'): every client-selection policy on one protocol,
under realistic client availability.

The field's best-known policies, each in its own module from its own paper (Power-of-d-Choice,
Clustered Sampling, Oort), join the four papers' samplers; the arena screens every policy under
every availability model on a cheap task and confirms the best on the small CNN, on paired seeds.
Its reproduction (configurations, results, claims, checks, figures) is
:mod:`aoi_fl.evidence.arena`, which depends on this package, never the reverse.
"""
