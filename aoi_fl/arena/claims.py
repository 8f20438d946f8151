"""The arena's rows of the claims ledger: findings of ours, not the papers' (issue 29).

Each row states a comparison fixed before the runs were looked at, in the ledger's words: a
policy "reaches the tier's target in fewer rounds" than a reference is "held" when the 95% paired
interval of the difference in rounds lies below 0, "not held" when it lies above, and
"inconclusive at this power" when it holds 0 (the spread gives the minimum detectable effect);
"inconclusive at this budget" when a run of a pair never reached the target within the horizon
(its value would be the horizon's, not the policy's); "inconclusive" while runs are missing.
Every row is at 95% on its own (no correction for the rows' number: the screen's are
exploratory, and the confirm tier runs on other seeds than the screen that chose its entrants).
The rows:

- the AoI paper's thesis under availability: its Markov optimal policy against uniform, under
  every availability model of the screen (``arena.screen.<model>.markov_optimal``);
- the calibration beyond the paper: the availability-calibrated Policy 3 against the paper's
  Policy 3 under every partial-availability model (``arena.screen.<model>.markov_available``);
- the confirm tier (the small CNN), where the screen's winners are tested on runs that did not
  choose them: every entrant against uniform on both of its availability models
  (``arena.confirm.<model>.<policy>``).
"""

from __future__ import annotations

import re

import pandas as pd

from aoi_fl.arena import experiments as ex
from aoi_fl.arena import results as ar
from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline.claims import VERDICT_GROUP, Claim
from aoi_fl.pipeline.profiles import PROFILES

NOTEBOOK = "20_selection_arena"
#: statements of a paper that this package tests: none (every row is ours)
UNTESTED: tuple = ()


def _faster(
    key: str, frame: pd.DataFrame, policy: str, reference: str, claim: str, ref: str
) -> Claim:
    c = ar.compare(frame, policy, reference, "rounds") if len(frame) else None
    if c is None:
        verdict, ours, spread = "inconclusive", None, "fewer than 2 paired seeds cached"
    elif c.word == ar.WORDS[3]:
        verdict, ours = "inconclusive at this budget", c.mean
        spread = f"{c.censored} run(s) of the {c.n} pairs never reached the target within T"
    else:
        decided = c.low > 0 or c.high < 0
        verdict = (
            ("held" if c.high < 0 else "not held") if decided else "inconclusive at this power"
        )
        ours = c.mean
        spread = f"95% paired interval [{c.low:+.3g}, {c.high:+.3g}] over {c.n} seeds"
        spread += f", MDE {c.mde:.3g}"
    return Claim(
        key,
        "arena",
        ref,
        claim,
        None,
        ours,
        spread,
        verdict,
        NOTEBOOK,
        printed_as=rf"^{re.escape(key)}: .* -> {VERDICT_GROUP}$",
        kind="ours",
    )


def screen_claims(frame: pd.DataFrame) -> list[Claim]:
    """The screen's rows (module docstring), from its runs' metrics (:func:`results.load`)."""
    target = ex.TASKS["screen"]["target"]
    rows = []
    for availability in ex.AVAILABILITY:
        part = frame[frame.availability == availability] if len(frame) else frame
        rows.append(
            _faster(
                f"arena.screen.{availability}.markov_optimal",
                part,
                "markov_optimal",
                "uniform",
                f"under {availability} availability, the AoI paper's Markov optimal policy "
                f"reaches {target:.0%} (screen task) in fewer rounds than uniform selection",
                "screen",
            )
        )
    for availability in ex.AVAILABILITY:
        if availability == "always":
            continue
        part = frame[frame.availability == availability] if len(frame) else frame
        rows.append(
            _faster(
                f"arena.screen.{availability}.markov_available",
                part,
                "markov_available",
                "markov_optimal",
                f"under {availability} availability, Policy 3 calibrated to each client's "
                f"availability reaches {target:.0%} (screen task) in fewer rounds than the "
                "paper's Policy 3",
                "screen (beyond the paper)",
            )
        )
    return rows


def confirm_claims(
    screen: pd.DataFrame, missing: int, profile: str, results_dir: str
) -> list[Claim]:
    """The confirm tier's rows: every entrant against uniform on its two availability models
    (nothing until the screen, ``missing`` runs short, is complete: its choices define the
    tier)."""
    if missing or not len(screen):
        return []
    others, where = ar.best_others(screen), ar.most_separating(screen)
    frame, _ = ar.load_confirm(others, where, profile, cache_dir=results_dir)
    target = ex.TASKS["confirm"]["target"]
    rows = []
    for availability in ("always", where):
        part = frame[frame.availability == availability] if len(frame) else frame
        for policy in ex.confirm_entrants(others):
            if policy == "uniform":
                continue
            rows.append(
                _faster(
                    f"arena.confirm.{availability}.{policy}",
                    part,
                    policy,
                    "uniform",
                    f"under {availability} availability, {policy} reaches {target:.0%} with the "
                    "small CNN in fewer rounds than uniform selection",
                    "confirm",
                )
            )
    return rows


def claims(profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"):
    """Every row of the arena, from ``profile``'s cached runs."""
    del data_root
    profile = require_choice("profile", profile, PROFILES)
    screen, missing = ar.load("screen", profile, cache_dir=results_dir)  # read once, used twice
    return screen_claims(screen) + confirm_claims(screen, missing, profile, results_dir)


def verdict_lines(notebook: str, profile: str = "cpu", *, results_dir: str = "results"):
    """The lines the arena's notebook prints for its rows: "key: claim (ours; spread) ->
    verdict"."""
    rows = claims(profile, results_dir=results_dir) if notebook == NOTEBOOK else []
    return [
        f"{c.key}: {c.claim} (ours {'-' if c.ours is None else f'{c.ours:+.3g}'} rounds; "
        f"{c.spread}) -> {c.verdict}"
        for c in rows
    ]
