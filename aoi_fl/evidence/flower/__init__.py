"""The Flower simulation's evidence: the tables of ``notebooks/18_flower_simulation.ipynb``
(:mod:`~aoi_fl.evidence.flower.figures`)."""
