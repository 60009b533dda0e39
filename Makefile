# `make lab` opens the course; `make test` runs every unit test and every notebook at ci scale.
# Both create .venv with the pinned dependencies on their first run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: lab test unit notebooks bench warm lessons runs book slides clean-venv

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
	$(BIN)/python -m lmcourse.course.lessons warm $(LESSONS)

lessons: $(STAMP)
	$(BIN)/python -m lmcourse.course.lessons store $(LESSONS)

# The reference runs committed in reference_runs/: every lesson that stores runs retrained at cpu.
runs: $(STAMP)
	$(BIN)/python -m lmcourse.course.lessons runs $(LESSONS)

# The lessons with their stored outputs as a static site in book/ (offline: images and MathJax included).
book: $(STAMP)
	$(BIN)/python -m lmcourse.course.book --out book

# The lessons' demo paths as static reveal.js decks in slides/ (offline: reveal.js, MathJax and images included).
# reveal.js comes once from the npm registry, pinned and checked by sha256, into .venv (lmcourse/course/deck.py).
REVEAL_STAMP := $(VENV)/.installed-reveal

$(REVEAL_STAMP): $(STAMP)
	$(BIN)/python -m lmcourse.course.deck fetch
	touch $(REVEAL_STAMP)

slides: $(REVEAL_STAMP)
	$(BIN)/python -m lmcourse.course.deck build --out slides $(LESSONS)

bench: $(STAMP)
	LMCOURSE_DATA=$${LMCOURSE_DATA:-../shared/data} $(BIN)/python benchmarks/run_all.py

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
