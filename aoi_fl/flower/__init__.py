"""The selection policies and the algorithms of this project inside Flower (optional extra
``flower``).

- :mod:`aoi_fl.flower.strategy`: :class:`SamplerStrategy`, a Flower strategy (the Message API,
  ``flwr.serverapp.strategy.Strategy``) that selects clients with any ``aoi_fl`` sampler, asks
  the nodes whether they are available when the run has an availability model, and runs the
  server side of any ``aoi_fl`` algorithm on their replies, in client-index order;
- :mod:`aoi_fl.flower.client`: a ``ClientApp`` that answers the strategy's queries and runs the
  algorithm's client side with this project's models, partitions and mini-batch streams,
  keeping the client's state in the node;
- :mod:`aoi_fl.flower.adapter`: :func:`~aoi_fl.flower.adapter.with_policy`, any registered
  policy choosing the training nodes of a Flower user's own strategy (FedAvg, FedProx, ...)
  with a ClientApp that knows nothing of this project; :mod:`aoi_fl.flower.probes`: the loss
  probes of Power-of-d-Choice and Oort over Flower messages, for both strategies;
- :mod:`aoi_fl.flower.simulation`: the ServerApp's job (:func:`serve`) and a whole Ray
  simulation from one configuration; :mod:`aoi_fl.flower.app`: the project's Flower App
  (``flower-app/``, ``flwr run``; :mod:`aoi_fl.flower.superlink` starts it from Python);
  :mod:`aoi_fl.flower.inprocess`: the same strategy and
  ClientApp without Ray, in seconds; :mod:`aoi_fl.evidence.flower.figures`: the Flower
  simulation's tables;
  :mod:`aoi_fl.flower.cli`: ``python -m aoi_fl.flower check|run``, the App's run config checked
  in seconds and a run whose exit status says whether it completed.

Importing this package turns Flower's and Ray's usage telemetry off for this process and the
processes it starts (nothing the project runs may reach the network), and keeps their
ipywidgets notices out of notebook outputs.
"""

import logging
import os
import warnings

os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
# keeps Ray from rewriting CUDA_VISIBLE_DEVICES for tasks that ask for no GPU (and its warning)
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")

# Flower's modules import Ray, which in a notebook says (with a timestamp) that ipywidgets is
# missing for progress widgets this project does not use, and through tqdm.auto warns the same:
# a notebook's output must not change from run to run
logging.getLogger("ray.widgets.util").setLevel(logging.WARNING)
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="IProgress not found")
    import tqdm.auto  # noqa: F401  (imported once, quietly)
