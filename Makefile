# `make lab` opens the course; `make test` runs every unit test and every notebook at ci scale.
# Both create .venv with the pinned dependencies on their first run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: lab test unit notebooks bench warm lessons runs book slides clean-venv gpu-check

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "lmcourse needs Python >= 3.10; this is " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

test: $(STAMP)
	LMCOURSE_SCALE=ci $(BIN)/python -m pytest tests notebooks --nbval-lax --nbval-current-env -q

unit: $(STAMP)
	$(BIN)/python -m pytest tests -q

notebooks: $(STAMP)
	LMCOURSE_SCALE=ci $(BIN)/python -m pytest notebooks --nbval-lax --nbval-current-env -q

# Every lesson executed headless at $${LMCOURSE_SCALE:-cpu}: `warm` trains or loads each stored run (so Run All
# then loads them), `lessons` also saves the lessons with their outputs. LESSONS="2 7" picks some.
warm: $(STAMP)
	$(BIN)/python -m lmcourse.authoring.lessons warm $(LESSONS)

lessons: $(STAMP)
	$(BIN)/python -m lmcourse.authoring.lessons store $(LESSONS)

# The reference runs committed in reference_runs/: every lesson that stores runs retrained at cpu (LESSONS="6 9": some).
runs: $(STAMP)
	$(BIN)/python -m lmcourse.authoring.lessons runs $(LESSONS)

# The lessons with their stored outputs as a static site in book/ (offline: images and MathJax included).
book: $(STAMP)
	$(BIN)/python -m lmcourse.authoring.book --out book

# The lessons' demo paths as static reveal.js decks in slides/ (offline: reveal.js, MathJax and images included);
# LESSONS="5 9" picks some. tests/bad_inputs/test_course.py parses every form the README and docs/ document.
# reveal.js comes once from the npm registry, pinned and checked by sha256, into .venv (lmcourse/authoring/deck.py).
REVEAL_STAMP := $(VENV)/.installed-reveal

$(REVEAL_STAMP): $(STAMP)
	$(BIN)/python -m lmcourse.authoring.deck fetch
	touch $(REVEAL_STAMP)

slides: $(REVEAL_STAMP)
	$(BIN)/python -m lmcourse.authoring.deck build --out slides $(LESSONS)

bench: $(STAMP)
	LMCOURSE_DATA=$${LMCOURSE_DATA:-../shared/data} $(BIN)/python benchmarks/run_all.py

# The GPU path in one command, at most 8 minutes on one GPU: the CUDA tests, every lesson at cpu scale on CUDA,
# one epoch of each paper preset, ASGD finetuning, evaluate with the cache and dyneval, two DDP ranks. One table
# (also in $OUT/table.md, default gpu-check/, with a log per part); status 1 when a part fails. Without CUDA it says so and exits 0.
# Needs no .venv: it uses .venv/bin/python when there is one, else python3.
CHECK_PYTHON := $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)

gpu-check:
	LMCOURSE_DATA=$${LMCOURSE_DATA:-../shared/data} $(CHECK_PYTHON) benchmarks/gpu_check.py --out $${OUT:-gpu-check} $(GPU_CHECK_ARGS)

# The lessons in a real browser: JupyterLab in headless Chromium (the system's; see the README).
BROWSER_STAMP := $(VENV)/.installed-browser
.PHONY: test-browser

$(BROWSER_STAMP): $(STAMP) requirements-browser.lock
	$(BIN)/python -m pip install --quiet -r requirements-browser.lock
	touch $(BROWSER_STAMP)

test-browser: $(BROWSER_STAMP)
	@$(BIN)/python tests_browser/find_chromium.py >/dev/null
	LMCOURSE_SCALE=ci $(BIN)/python -m pytest tests_browser -q

clean-venv:
	rm -rf $(VENV)
