"""The ServerApp: Flower's FedAvg, its training nodes chosen by the run config's aoi_fl policy."""

import json
from pathlib import Path

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from aoi_fl.flower.adapter import policy_options, with_policy
from quickstart.task import initial_model

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    c = context.run_config
    strategy = FedAvg(fraction_evaluate=c["fraction-evaluate"])
    strategy = with_policy(strategy, **policy_options(c))
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(initial_model().state_dict()),
        num_rounds=c["num-server-rounds"],
    )
    if c["output"]:
        train_metrics = {r: dict(m) for r, m in result.train_metrics_clientapp.items()}
        record = {**strategy.history, "train_metrics": train_metrics}
        Path(c["output"]).write_text(json.dumps(record))
