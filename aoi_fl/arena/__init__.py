"""The selection arena (ours, not the papers'): every client-selection policy on one protocol,
under realistic client availability.

The field's best-known policies, each in its own module from its own paper (Power-of-d-Choice,
Clustered Sampling, Oort), join the four papers' samplers; the arena screens every policy under
every availability model on a cheap task and confirms the best on the small CNN, on paired seeds.
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the ledger key and title, the modules whose import
#: registers policies, and the module of the ledger rows
KEY = "arena"
TITLE = "Selection arena (ours, not the papers')"
REGISTERS: tuple[str, ...] = ("all_available", "power_of_choice", "clustered", "oort", "policies")
CLAIMS = "claims"
#: no paper of its own: no statements to sweep for the ledger's untested list
SWEPT = False
