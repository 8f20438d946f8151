"""The arena's two tiers as configurations: every policy under every availability model.

MD sampling (Li et al.'s FedProx sampling, named so by Fraboni et al.: m draws with replacement
with probabilities proportional to the clients' data sizes, each draw weighted 1/m) is exactly the
AoI paper's Policy 2, ``probabilistic`` (w_i = l_i / m, l_i the draws of client i), so it takes
part under that name; ``random`` (the AoI paper's Policy 1: m distinct clients uniformly, weights
proportional to their sizes) is not MD sampling.

Protocol. One task per tier, n = 100 clients holding Fashion-MNIST with Dirichlet(0.3) labels,
m = 10 clients per round, K = 5 local SGD steps of batch 32, a constant learning rate, FedAvg
with the ``weighted_delta`` aggregation (theta + sum_i w_i (theta_i - theta): FedAvg itself for
weights that sum to one, and the unbiased estimator of K-Vib's Alg. 1 for the unbiased samplers).
Within a seed every policy sees the same partition, initial model, mini-batch streams and
availability trace (the seed is shared by every stream; the sampler's own stream is separate), so
policies are compared by paired differences over seeds.

- Screen: softmax regression (784 -> 10), every policy of :data:`POLICIES` x every availability
  model of :data:`AVAILABILITY`, 10 seeds, T = 200 rounds, the target 0.78 fixed before running.
- Confirm: the small CNN (:class:`aoi_fl.core.models.SmallCNN`), the four AoI policies, uniform,
  the availability-calibrated Markov policy and the three best others of the screen, on full
  availability and on the model where the screen separated the policies most, 5 seeds (10 in the
  paper profile), T = 300, the target 0.80.

The screen's target and horizon were fixed from three pilot runs (seed 2, Bernoulli availability:
uniform, Power-of-d-Choice, Clustered Sampling by similarity; seed 2 is one of the screen's ten,
but no comparison was looked at), before any policy was compared:
their test accuracy crossed 0.78 in rounds 31-40 and then levelled off at 0.80-0.83, where
round-to-round noise (about 0.01) would make the first crossing of a higher target a matter of
luck; 200 rounds leave five times the pilots' time to the target. The confirm tier's were fixed
from one pilot run of uniform under full availability (seed 100, not one of the compared seeds):
its test accuracy crossed 0.80 at round 120 and reached 0.85 by round 300 (0.47 CPU seconds a
round on one thread, evaluations included).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from aoi_fl.arena.policies import ARENA_FAMILY
from aoi_fl.core.registry import Style, register_family, register_style, with_clients
from aoi_fl.core.validation import require_choice, require_int
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.profiles import settings, traits

# the arena's reference, FedSUM's P1 pattern, which no paper's figure draws on its own
register_style("uniform", Style("uniform", "#000000", "*"))
register_family("the arena's policies", ARENA_FAMILY)

#: the policies of the screen, with their configuration options for n clients, m per round, T
#: rounds (see :func:`sampler_spec`)
POLICIES: tuple[str, ...] = (
    "uniform",
    "random",
    "probabilistic",
    "markov_optimal",
    "markov_nonoptimal",
    "markov_available",
    "kvib",
    "vrb",
    "mabs",
    "power_of_choice",
    "power_of_choice_stale",
    "clustered_size",
    "clustered_similarity",
    "oort",
)
#: the AoI paper's four policies and the two references every comparison is made against
AOI_POLICIES = ("random", "probabilistic", "markov_optimal", "markov_nonoptimal")
REFERENCES = ("uniform", "markov_optimal")
#: the confirm tier's fixed entrants (the three best others of the screen join them)
CONFIRM_FIXED = ("uniform", *AOI_POLICIES, "markov_available")

#: availability models of the arena (name -> its configuration section, without the seed):
#: the mean availability of every partial model is about one third, so that about 33 of the 100
#: clients can answer in a round and the policy chooses 10 of them
AVAILABILITY: dict[str, dict[str, Any]] = {
    "always": {"name": "always"},
    "bernoulli": {"name": "bernoulli", "mean": 0.33, "concentration": 4.0, "correlation": "none"},
    "bernoulli_size": {
        "name": "bernoulli",
        "mean": 0.33,
        "concentration": 4.0,
        "correlation": "size",
    },
    "markov_onoff": {"name": "markov_onoff", "mean_on": 5.0, "mean_off": 10.0},
    "diurnal": {"name": "diurnal", "base": 0.33, "amplitude": 0.3, "period": 24},
}


def availability_name(section: dict[str, Any] | None) -> str:
    """The arena's name (a key of :data:`AVAILABILITY`) of a configuration's availability
    section (None: everyone always available)."""
    if section is None:
        return "always"
    options = {k: v for k, v in section.items() if k != "seed"}
    for name, spec in AVAILABILITY.items():
        if spec == options:
            return name
    raise ValueError(f"availability section {section!r} is none of the arena's models")


_TIERS: dict[str, dict[str, dict[str, Any]]] = {
    "screen": {
        "paper": {"rounds": 200, "seeds": 10, "n": 100, "m": 10, "eval_every": 1},
        "cpu": {"rounds": 200, "seeds": 10, "n": 100, "m": 10, "eval_every": 1},
        "smoke": {"rounds": 4, "seeds": 2, "n": 20, "m": 4, "eval_every": 1},
    },
    "confirm": {
        "paper": {"rounds": 300, "seeds": 10, "n": 100, "m": 10, "eval_every": 10},
        "cpu": {"rounds": 300, "seeds": 5, "n": 100, "m": 10, "eval_every": 10},
        "smoke": {"rounds": 3, "seeds": 2, "n": 20, "m": 4, "eval_every": 1},
    },
}
TIERS = tuple(_TIERS)
#: the task of each tier: model, learning rate, target accuracy, engine, test-subset screening
TASKS: dict[str, dict[str, Any]] = {
    "screen": {
        "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10},
        "lr": 0.02,
        "target": 0.78,
        "engine": "linear",
        "screen_samples": 0,
    },
    "confirm": {
        "model": {"name": "small_cnn"},
        "lr": 0.05,
        "target": 0.80,
        "engine": "auto",
        "screen_samples": 2000,
    },
}
#: local steps, batch size, Dirichlet concentration of the labels
LOCAL_STEPS, BATCH_SIZE, ALPHA = 5, 32, 0.3
#: the samples a participant's local steps visit in a round (Oort's |B_i|, rpow-d's loss)
TRAINED_SAMPLES = LOCAL_STEPS * BATCH_SIZE
#: the confirm tier's seeds start here: other partitions, models and availability traces than
#: the screen's seeds 0, 1, ..., so that its runs did not take part in choosing its entrants
CONFIRM_SEED0 = 1000
#: samples per client on which Power-of-d-Choice measures a candidate's loss (cpow-d's estimate;
#: the full local data on the screen's linear model, a subset on the CNN)
PROBE_SAMPLES = {"screen": None, "confirm": 100}


def tier_settings(tier: str, profile: str) -> dict[str, Any]:
    """Rounds, seeds, n, m and the evaluation period of a tier in a profile."""
    tier = require_choice("tier", tier, TIERS)
    return settings(profile, _TIERS[tier])


def sampler_spec(policy: str, n: int, m: int, rounds: int, tier: str) -> dict[str, Any]:
    """The sampler section of ``policy`` at m clients per round (without the seed)."""
    policy = require_choice("policy", policy, POLICIES)
    plugins.load()  # the registered samplers say how each spells its clients per round
    options = _policy_options(policy, n, m, rounds, tier)
    return {"name": policy, **with_clients(policy, {"m": m}), **options}


def _policy_options(policy: str, n: int, m: int, rounds: int, tier: str) -> dict[str, Any]:
    """A policy's options besides its clients per round."""
    if policy in ("kvib", "vrb", "mabs"):
        return {"rounds": rounds}
    if policy == "power_of_choice":
        return {"d": min(2 * m, n), "probe_samples": PROBE_SAMPLES[tier]}
    if policy == "power_of_choice_stale":
        # rpow-d's stored loss: over as many samples as a participant's local steps visit
        return {"d": min(2 * m, n), "probe_samples": TRAINED_SAMPLES}
    if policy == "oort":
        return {"trained_samples": TRAINED_SAMPLES}
    if policy.startswith("markov"):
        return {"m_prime": 10}
    return {}


def config(
    policy: str, availability: str, seed: int, *, tier: str = "screen", profile: str = "cpu"
) -> dict[str, Any]:
    """One arena run: ``policy`` under availability model ``availability``, seed ``seed``."""
    s = tier_settings(tier, profile)
    availability = require_choice("availability", availability, AVAILABILITY)
    seed = require_int("seed", seed, minimum=0)
    task = TASKS[tier]
    quick = traits(profile).quick
    dataset: dict[str, Any] = {"name": "fashion_mnist"}
    if quick:
        dataset.update(n_train=2000, n_test=500)
    training: dict[str, Any] = {
        "rounds": s["rounds"],
        "local_steps": LOCAL_STEPS,
        "batch_size": BATCH_SIZE,
        "seed": seed,
        "eval_every": s["eval_every"],
        "engine": task["engine"],
        "lr": {"name": "constant", "lr": task["lr"]},
        "algorithm": {"name": "fedavg", "aggregation": "weighted_delta"},
        "keep_params": False,
        "client_accuracy": True,
        # hundreds of committed runs: no update norms (no policy here needs them recorded)
        # and a compressed record
        "record_norms": False,
        "compress": True,
    }
    if task["screen_samples"] and not quick:
        training.update(screen_samples=task["screen_samples"], screen_target=task["target"])
    return {
        "dataset": dataset,
        "partition": {"name": "dirichlet", "n_clients": s["n"], "seed": seed, "alpha": ALPHA},
        "model": {**task["model"], "seed": seed},
        "sampler": {**sampler_spec(policy, s["n"], s["m"], s["rounds"], tier), "seed": seed},
        "training": training,
        "availability": {**AVAILABILITY[availability], "seed": seed},
    }


def grid(
    policies: Sequence[str],
    availabilities: Iterable[str],
    *,
    tier: str = "screen",
    profile: str = "cpu",
) -> list[dict[str, Any]]:
    """Every (availability, policy, seed) run, seeds innermost so that finished seeds pair up;
    the screen's seeds are 0, 1, ..., the confirm tier's :data:`CONFIRM_SEED0`, ...."""
    seeds = tier_settings(tier, profile)["seeds"]
    first = CONFIRM_SEED0 if tier == "confirm" else 0
    return [
        config(policy, availability, seed, tier=tier, profile=profile)
        for availability in availabilities
        for policy in policies
        for seed in range(first, first + seeds)
    ]


def screen_grid(profile: str = "cpu") -> list[dict[str, Any]]:
    """The screen: every policy x every availability model x the profile's seeds."""
    return grid(POLICIES, AVAILABILITY, tier="screen", profile=profile)


def confirm_entrants(others: Sequence[str]) -> tuple[str, ...]:
    """The confirm tier's policies: the fixed entrants, then ``others`` (the screen's best)."""
    return tuple(dict.fromkeys((*CONFIRM_FIXED, *others)))  # in order, each once


def confirm_models(availability: str) -> tuple[str, ...]:
    """Full availability and ``availability`` (where the screen separated the policies most)."""
    availability = require_choice("availability", availability, AVAILABILITY)
    return ("always",) if availability == "always" else ("always", availability)


def confirm_grid(
    others: Sequence[str], availability: str, profile: str = "cpu"
) -> list[dict[str, Any]]:
    """The confirm tier: the fixed entrants plus ``others`` (the screen's three best), on full
    availability and on ``availability``."""
    return grid(
        confirm_entrants(others), confirm_models(availability), tier="confirm", profile=profile
    )
