# aoi-fl: every command a user needs. The first call builds the virtual environment in .venv.
#   make figures            execute every notebook (profile cpu) and write figures/
#   make figures PROFILE=paper   the papers' exact settings (GPU recommended for training)
#   make figures NB=03      one notebook (prefix match)
#   make figures RERUN=1    recompute cached training results instead of re-plotting them
#   make figures DEVICE=cuda   train missing runs there (auto, cpu, cuda, cuda:N; default auto)
#   make figures EXECUTOR=ray  train missing runs as Ray tasks (RAY_ADDRESS=... joins a cluster)
#   make test               lint, unit tests, and every notebook under nbval in the smoke profile
#                           (TEST_JOBS=2 unit-test workers; TEST_JOBS=0 runs them in this process)
#   make foreign-cpu        the CPU-sensitive tests again, with the kernels of another x86-64 CPU
#   make test-fast          the unit tests not marked slow (under a minute): for the edit-test loop
#   make bench              performance benchmarks (ratios against references in the same run)
#   make gpu-session MINUTES=8   on a CUDA machine: CUDA tests, GPU benchmark, then paper runs
#   make lab                JupyterLab on the notebooks (LAB_IP, LAB_PORT; --allow-root when root)
#   make report             the notebooks as static HTML in report/ (report-check: in Chromium)

# the venv's interpreter: the pins are tested on Python 3.11 only (pyproject's requires-python)
PYTHON3 ?= $(shell command -v python3.11 2>/dev/null || echo python3)
VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= cpu
NB      ?=
RERUN   ?= 0
DEVICE  ?=
EXECUTOR ?=
LAB_IP  ?= 127.0.0.1
LAB_PORT ?= 8888
LAB_ARGS ?=
# make gpu-session: the whole session's wall clock, in minutes
MINUTES ?= 8
# the unit tests' worker processes (pytest-xdist), one test file per worker
TEST_JOBS ?= 2
# each test worker single-threaded: TEST_JOBS workers with PyTorch's and OpenBLAS's default
# thread counts oversubscribe the cores, and their spinning threads slow each other down
# (measured: notebook 20's smoke confirm tier 151 s with two threads a worker, 33 s with one)
TEST_THREADS := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# JupyterLab will not start as root without this flag, and containers usually run as root
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# what runs apt-get as root: nothing added for root (env), else sudo; empty where neither is
AS_ROOT ?= $(if $(filter 0,$(shell id -u)),env,$(shell command -v sudo 2>/dev/null))
export PYTHONHASHSEED := 0
ifneq ($(DEVICE),)
export AOI_FL_DEVICE := $(DEVICE)
endif
ifneq ($(EXECUTOR),)
export AOI_FL_EXECUTOR := $(EXECUTOR)
endif
# nothing the project runs may report usage to Flower or Ray
export FLWR_TELEMETRY_ENABLED := 0
export RAY_USAGE_STATS_ENABLED := 0

.PHONY: all venv check-python data figures test test-fast lint unit foreign-cpu nbtest bench lab clean \
	report browser report-check gpu-session

all: figures

venv: $(VENV)/.installed

# the entry points' file too: the installed metadata lists the papers' samplers from it;
# constraints.txt holds what the pins pull in to the versions the tests passed with
$(VENV)/.installed: pyproject.toml aoi_fl/entry_points.txt constraints.txt
	@$(MAKE) --no-print-directory check-python
	$(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c constraints.txt
	$(PY) -m pip install --quiet -c constraints.txt -e '.[flower,ray,dev]'
	touch $@

# before pip stops with a requires-python error deep inside the install: say what to do
check-python:
	@$(PYTHON3) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { \
	  echo "aoi-fl needs Python 3.11, but PYTHON3=$(PYTHON3) is: $$($(PYTHON3) --version 2>&1)." >&2; \
	  echo "Install Python 3.11 (e.g. apt install python3.11 python3.11-venv) and run make again" >&2; \
	  echo "(python3.11 is picked up by itself), or name it: make figures PYTHON3=/path/to/python3.11," >&2; \
	  echo "or use conda: conda env create -f environment.yml. Only 3.11 is tested (README)." >&2; \
	  exit 1; }

# always data/: the notebooks read ../data. Fashion-MNIST comes from a Debian package: where
# apt-get does not list it (exit status 3: a fresh machine's empty package lists), the lists are
# updated, as root, and the fetch tried again; any other failure stands as it is
data: venv
	$(PY) -m aoi_fl.data fetch-mnist --root data
	@echo "$(PY) -m aoi_fl.data fetch-fashion-mnist --root data"; \
	$(PY) -m aoi_fl.data fetch-fashion-mnist --root data || { status=$$?; \
	  [ $$status = 3 ] && [ -n "$(AS_ROOT)" ] || exit $$status; \
	  echo "updating the package lists (apt-get update) and fetching Fashion-MNIST again"; \
	  $(AS_ROOT) apt-get update -q && $(PY) -m aoi_fl.data fetch-fashion-mnist --root data; }

# the variables are checked before the data step (seconds to start even with the data there), so
# that a mistyped one is refused at once; "=" keeps an empty value an argument (PROFILE= is refused)
FIGURES_ARGS = --profile=$(PROFILE) --rerun=$(RERUN) $(if $(NB),--only=$(NB),)
figures: venv
	@$(PY) scripts/run_notebooks.py --check $(FIGURES_ARGS)
	@$(MAKE) --no-print-directory data
	$(PY) scripts/run_notebooks.py $(FIGURES_ARGS)

lint: venv
	$(PY) -m ruff check aoi_fl tests benchmarks scripts flower-app examples
	$(PY) -m ruff format --check aoi_fl tests benchmarks scripts flower-app examples
	$(VENV)/bin/lint-imports --no-logo --no-cache

unit: venv data
	$(TEST_THREADS) $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile --durations=15 tests

# a stranger's CPU rounds differently: the tests whose numbers depend on the kernels, run with
# other kernels than this machine's defaults (scripts/foreign_cpu.py says which). They are few
# and long, so they go to the workers one by one (loadgroup), except those that share the
# ledger's build (their xdist_group keeps them on one worker)
foreign-cpu: venv data
	$(TEST_THREADS) $(PY) scripts/foreign_cpu.py $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadgroup -m cpu_sensitive tests

# one notebook per worker: each runs in a kernel of its own either way
nbtest: venv data
	$(TEST_THREADS) AOI_FL_PROFILE=smoke MPLBACKEND=agg $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile --nbval-lax notebooks

test: lint browser unit foreign-cpu nbtest report-check

test-fast: venv data
	$(TEST_THREADS) $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not slow" tests

bench: venv data
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# on a lent GPU machine without the venv: PYTHONPATH=. python3 scripts/gpu_session.py --minutes 8
gpu-session: venv data
	$(PY) scripts/gpu_session.py --minutes $(MINUTES)

lab: venv data
	@echo "JupyterLab on the notebooks: open the http://$(LAB_IP):$(LAB_PORT)/lab?token=... URL it prints below (Ctrl-C stops it)"
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --no-browser --ip=$(LAB_IP) --port=$(LAB_PORT) $(LAB_ROOT) $(LAB_ARGS)

# the committed notebooks (outputs as they are, nothing executed) as static HTML, plus an index
report: venv
	$(PY) scripts/build_report.py --out report

# headless Chromium and its driver for the report's browser check (Debian packages)
browser:
	@if command -v chromium >/dev/null 2>&1 && [ -x /usr/bin/chromedriver ]; then exit 0; fi; \
	pkgs="chromium chromium-driver"; \
	if [ -z "$(AS_ROOT)" ]; then \
	  echo "The report check needs Chromium and its driver: install the Debian packages" >&2; \
	  echo "'$$pkgs' (apt-get install $$pkgs) as root, then run make again." >&2; exit 1; fi; \
	echo "installing $$pkgs with apt-get (once)"; \
	$(AS_ROOT) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$pkgs \
	  || { $(AS_ROOT) apt-get update -q && \
	       $(AS_ROOT) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$pkgs; }

# the site in a real browser: every page and link, no console errors, no broken images
report-check: report browser
	$(PY) scripts/check_report.py --site report --screenshot report/index.png

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
