"""Datasets on disk (:mod:`~aoi_fl.data.datasets`, also a command line:
``python -m aoi_fl.data``), client partitions (:mod:`~aoi_fl.data.partition`) and synthetic
tasks (:mod:`~aoi_fl.data.synthetic`)."""
