"""Datasets on disk (:mod:`~aoi_fl.data.datasets`, also a command line:
``python -m aoi_fl.data``; its file formats and fetchers in :mod:`~aoi_fl.data.mnist`,
:mod:`~aoi_fl.data.fashion_mnist`, :mod:`~aoi_fl.data.cifar`, :mod:`~aoi_fl.data.idx`,
:mod:`~aoi_fl.data.files`), client partitions (:mod:`~aoi_fl.data.partition`) and synthetic
tasks (:mod:`~aoi_fl.data.synthetic`)."""
