"""The selection policies of this project inside Flower (optional extra ``flower``).

- :mod:`aoi_fl.flower.strategy`: :class:`SamplerStrategy`, a Flower strategy (the Message API,
  ``flwr.serverapp.strategy.Strategy``) that selects clients with any ``aoi_fl`` sampler and
  aggregates their replies in client-index order, in float64, with the selection's weights;
- :mod:`aoi_fl.flower.client`: a ``ClientApp`` that answers the strategy's index query and
  trains a client with this project's models, partitions and mini-batch streams;
- :mod:`aoi_fl.flower.simulation`: a whole Flower simulation from one configuration.

Importing this package turns Flower's and Ray's usage telemetry off for this process and the
processes it starts (nothing the project runs may reach the network).
"""

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# keeps Ray from rewriting CUDA_VISIBLE_DEVICES for tasks that ask for no GPU (and its warning)
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
