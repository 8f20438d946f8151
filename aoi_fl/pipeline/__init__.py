"""From a configuration to a figure: runs and grids (:mod:`~aoi_fl.pipeline.runs`, which gathers
:mod:`~aoi_fl.pipeline.resolve`, :mod:`~aoi_fl.pipeline.parts` and
:mod:`~aoi_fl.pipeline.experiment`), the checks of configurations
(:mod:`~aoi_fl.pipeline.config_checks`), the cache (:mod:`~aoi_fl.pipeline.cache`), the papers
and a user's installed policies (:mod:`~aoi_fl.pipeline.plugins`), profiles
(:mod:`~aoi_fl.pipeline.profiles`), plotting (:mod:`~aoi_fl.pipeline.plotting`) and the notebooks'
setup (:mod:`~aoi_fl.pipeline.notebook`)."""
