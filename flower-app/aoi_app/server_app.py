"""The ServerApp: trains the run configuration and writes its history (``output``)."""

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from aoi_fl.flower.app import serve_run

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    serve_run(grid, context)
