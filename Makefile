# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
# pytest workers (the machine has 2 cores); torch threads per worker.
TEST_WORKERS ?= 2
export OMP_NUM_THREADS ?= 1

.PHONY: demo test docs install browser clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU wheel of torch 2.13.0 (any other version pulls CUDA packages).
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[test,report,ray,docs,heterorr]'
	touch $(STAMP)

# Headless Chromium renders the HTML report in the screenshot test (Debian package).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: screenshot tests will skip"; \
	  else echo "chromium not installed (needs root + apt-get): screenshot tests will skip"; fi; }

demo: $(STAMP)
	$(VENV)/bin/gnnprivacy demo --runs-dir runs/demo -o reports/demo

test: $(STAMP) browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=15

# The documentation site (mkdocs + mkdocstrings), warnings are errors; output in site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf runs reports site .pytest_cache
