"""From a configuration to a figure: run registries and cached runs (:mod:`~aoi_fl.pipeline.runs`,
:mod:`~aoi_fl.pipeline.cache`), profiles (:mod:`~aoi_fl.pipeline.profiles`), plotting
(:mod:`~aoi_fl.pipeline.plotting`) and the notebooks' setup (:mod:`~aoi_fl.pipeline.notebook`)."""
