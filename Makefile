# The two commands of the README: `make demo` and `make test`. Each builds .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Pinned beside the package: on a CPU-only machine this resolves to the local CPU wheel; an open
# range would pull several GB of CUDA packages. The package's own `torch>=2.4` adds nothing to it.
# One pip run resolves both (10 s less than two here). The venv's own pip is kept where it can do
# an editable install from pyproject.toml (PEP 660: 21.3); an older one is upgraded first.
TORCH_PIN ?= torch==2.13.0
STAMP := $(VENV)/.installed
# `make test` runs the suite this many tests at a time (pytest-xdist), then the tests marked
# `serial` (they measure time or load) one at a time with nothing beside them. The parallel part
# gives each worker (and the scripts it starts) one torch thread, as torchrun does for several
# processes on one machine: two workers of two threads each on two cores spin against each other
# (quiet, 331 s against 277 s for that part here). mypy checks beside it: it needs one core for
# half a minute and changes no test's verdict. The serial part keeps the machine's own threads.
TEST_WORKERS ?= 2
TEST_THREADS ?= 1

.PHONY: demo test test-slow lint typecheck docs clean browser

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "pip>=21.3"
	$(PY) -m pip install --quiet "$(TORCH_PIN)" -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m torchpace demo

# The HTML report's browser test needs Chromium: Debian's package, installed here when this is a
# Debian machine where we are root (CI is); elsewhere the test skips and says why.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "make browser: no chromium and cannot install it here; the browser test will skip"; fi

test: $(STAMP) browser
	$(PY) -m ruff check src tests examples benchmarks
	$(PY) -m ruff format --check src tests examples benchmarks
	$(PY) -m mypy & mypy=$$!; \
	OMP_NUM_THREADS=$(TEST_THREADS) $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal \
	  -m "not slow and not serial"; rc=$$?; wait $$mypy && exit $$rc
	$(PY) -m pytest -m "serial and not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -m slow

docs: $(STAMP)
	$(PY) -m torchpace techniques --write-docs docs/techniques.md
	$(PY) -m torchpace rules --write-docs docs/rules.md

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache

# bench-lint: `torchpace lint` against TorchFix over torch's own source (benchmarks/README.md).
# TorchFix goes into its own .venv-bench: it needs flake8, PyYAML and libcst, and no torch.
BENCH_VENV := .venv-bench
LINT_BENCH_JSON ?= benchmarks/results/$(shell date +%F)-lint-speed.json
.PHONY: bench-lint

$(BENCH_VENV)/bin/torchfix:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet "torchfix==0.7.0"

bench-lint: $(STAMP) $(BENCH_VENV)/bin/torchfix
	$(PY) benchmarks/lint_speed.py --torchfix $(BENCH_VENV)/bin/torchfix --json $(LINT_BENCH_JSON)

# bench-lint-realworld: precision and recall of `torchpace lint` on public training code, against
# judgements by hand (benchmarks/realworld/README.md). The corpus is materialised at pinned
# commits into .corpus/lint (git-ignored); MIRROR=/work/.mirror reads local bare mirrors instead.
LINT_REALWORLD_JSON ?= benchmarks/results/$(shell date +%F)-lint-realworld.json
.PHONY: bench-lint-realworld
bench-lint-realworld: $(STAMP)
	$(PY) benchmarks/realworld/make_corpus.py --out .corpus/lint $(if $(MIRROR),--mirror $(MIRROR))
	$(PY) benchmarks/realworld/score.py --corpus .corpus/lint --json $(LINT_REALWORLD_JSON) $(REALWORLD_ARGS)

# test-faults: kill fit, doctor and tune 30 times each (SIGINT, SIGTERM, SIGKILL) and check that
# nothing is corrupt, orphaned or redone, and that each said why (benchmarks/README.md).
FAULTS_JSON ?= benchmarks/results/$(shell date +%F)-faults.json
.PHONY: test-faults
test-faults: $(STAMP)
	$(PY) benchmarks/fault_injection.py --per-verb 30 --json $(FAULTS_JSON)

# bench-doctor: the doctor's cost per step on the reference workloads (benchmarks/README.md).
DOCTOR_BENCH_JSON ?= benchmarks/results/$(shell date +%F)-doctor-overhead.json
.PHONY: bench-doctor
bench-doctor: $(STAMP)
	$(PY) benchmarks/doctor_overhead.py --json $(DOCTOR_BENCH_JSON)

# bench-peers: torchpace against Lightning, Accelerate, a hand-tuned loop and the naive scripts
# (benchmarks/README.md). The peers go into .venv with torch pinned to the installed build, so pip
# never replaces it (an unpinned torch would pull several GB of CUDA wheels on a CPU machine).
PEERS_DEVICE = $(shell $(PY) -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')" 2>/dev/null)
PEERS_BENCH_JSON ?= benchmarks/results/$(shell date +%F)-$(PEERS_DEVICE).json
PEERS_ARGS ?=  # e.g. "--lm-size 300m" on a GPU, "--workloads cnn --rounds 1" for a quick try
.PHONY: bench-peers
bench-peers: $(STAMP)
	$(PY) -c "import torch; print('torch==' + torch.__version__)" > $(VENV)/torch-constraint.txt
	$(PY) -m pip install --quiet -c $(VENV)/torch-constraint.txt -e ".[bench]"
	$(PY) benchmarks/peers.py --json $(PEERS_BENCH_JSON) $(PEERS_ARGS)

# bench-scripts: torchpace tune and run on public training scripts, unmodified
# (benchmarks/script_corpus/README.md), and the script tune of the naive examples against the
# recipe tune (benchmarks/script_tune.py). The corpus is materialised from GitHub at pinned commits
# into .corpus/ (git-ignored); its imports go into .venv with torch pinned, as for bench-peers.
SCRIPTS_JSON ?= benchmarks/results/$(shell date +%F)-corpus-tune.json
SCRIPTS_ARGS ?=  # e.g. "--only nanogpt-shakespeare-char --budget 2m"
.PHONY: bench-scripts
bench-scripts: $(STAMP)
	$(PY) -c "import torch; print('torch==' + torch.__version__)" > $(VENV)/torch-constraint.txt
	$(PY) -m pip install --quiet -c $(VENV)/torch-constraint.txt -e ".[bench,corpus]"
	$(PY) benchmarks/script_corpus/make_corpus.py --out .corpus/scripts
	$(PY) benchmarks/script_corpus/tune_corpus.py --json $(SCRIPTS_JSON) $(SCRIPTS_ARGS)

# gpu-check: the GPU kit (docs/gpu.md). Runs on a lent GPU machine as it is: its own python3 and
# torch, PYTHONPATH=src, no pip, no network, no .venv; pure-Python packages it lacks come from
# .gpu-wheels/ (`make gpu-wheels`, here, where the registry is reachable). Without CUDA it is a
# dry run: `make gpu-check GPU_PYTHON=.venv/bin/python` skips what needs CUDA and runs the rest.
GPU_PYTHON ?= python3
STAGE ?= all
GPU_JSON ?= gpu-check.json
GPU_WHEEL_PYTHON ?= 3.12  # the lent machine's Python (docs/gpu.md)
GPU_WHEELS := jsonschema>=4.18
.PHONY: gpu-check gpu-wheels
gpu-check:
	$(GPU_PYTHON) benchmarks/gpu/kit.py --stage $(STAGE) --python $(GPU_PYTHON) --json $(GPU_JSON)

gpu-wheels:
	$(PYTHON) -m pip download --quiet --only-binary=:all: --implementation cp \
	  --python-version $(strip $(GPU_WHEEL_PYTHON)) --platform manylinux_2_28_x86_64 \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d .gpu-wheels "$(GPU_WHEELS)"
