"""The ClientApp: one node per client, configured by the run configuration."""

from aoi_fl.flower.app import node_config, node_data_root
from aoi_fl.flower.client import client_app

app = client_app(node_config, node_data_root)
