"""Where :func:`aoi_fl.pipeline.runs.run_grid` trains missing runs, in a module that loads
nothing heavy, so that ``make figures`` can check ``EXECUTOR`` before any notebook starts."""

#: this machine's processes, or Ray
EXECUTORS = ("local", "ray")
#: the environment variable that picks the executor when ``run_grid`` is not told
EXECUTOR_VAR = "AOI_FL_EXECUTOR"
