# The two commands a new machine needs: `make dev` (start the local stack) and `make test`.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# aws-sam-cli lives in its own venv: it pins boto3/click versions of its own.
SAM_VERSION := 1.170.0
SAM_VENV    := .venv-sam
SAM         := $(SAM_VENV)/bin/sam
# The SQS adapter's query-protocol clients (tests/compat): awscli 1.29.80 and boto3 1.28.80
# on botocore 1.31.80, the last botocore before SQS moved to the JSON protocol, in their own venv.
SQS_QUERY_VENV := .venv-sqs-query
SQS_QUERY_AWS  := $(SQS_QUERY_VENV)/bin/aws
# The outside SQS conformance suite (make test-compat): moto's AWS-verified SQS tests, from
# moto's source distribution on PyPI (pinned with its hash in tests/compat/outside/moto-suite.txt),
# unpacked into a git-ignored folder, run unmodified by tests/compat/outside/run_moto_sqs.py
# with each protocol's botocore: the project's venv (JSON) and COMPAT_QUERY_VENV (query).
COMPAT_DIR         := .compat-suites
MOTO_SUITE_PIN     := tests/compat/outside/moto-suite.txt
MOTO_SUITE_VERSION := $(shell sed -n 's/^moto==\([^ ]*\).*/\1/p' $(MOTO_SUITE_PIN))
MOTO_SUITE         := $(COMPAT_DIR)/moto-$(MOTO_SUITE_VERSION)
COMPAT_QUERY_VENV  := .venv-sqs-compat-query
COMPAT_QUERY_PY    := $(COMPAT_QUERY_VENV)/bin/python
COMPAT_QUERY_STAMP := $(COMPAT_QUERY_VENV)/.installed-moto-server-$(MOTO_SUITE_VERSION)
# LocalStack's SQS tests (AWS-recorded snapshots), vendored unmodified in
# tests/compat/outside/localstack, run in their own venv: localstack-core needs Python 3.13 and
# pins boto3/botocore of its own (tests/compat/outside/localstack/requirements.txt).
LS_SUITE_DIR  := tests/compat/outside/localstack
LS_SUITE_VENV := .venv-localstack-suite
LS_SUITE_PY   := $(LS_SUITE_VENV)/bin/python
LS_SUITE_STAMP := $(LS_SUITE_VENV)/.installed-$(shell cksum < $(LS_SUITE_DIR)/requirements.txt | cut -d' ' -f1)
LS_SUITE_PYTHON ?= $(firstword $(foreach p,python3.13 python3.14 $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13),\
  $(shell $(p) -c 'import sys; assert sys.version_info >= (3, 13); print("$(p)")' 2>/dev/null)))

.PHONY: install dev front-door-routes test test-deploy test-compat test-compat-moto test-compat-localstack sam-build bench bench-report lint sqs-query-clients

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints.txt -e ".[dev]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

$(SAM):
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet "aws-sam-cli==$(SAM_VERSION)"

$(SQS_QUERY_AWS):
	test -x $(SQS_QUERY_VENV)/bin/python || $(PYTHON) -m venv $(SQS_QUERY_VENV)
	$(SQS_QUERY_VENV)/bin/pip install --quiet "awscli==1.29.80" "boto3==1.28.80" "botocore==1.31.80"

sqs-query-clients: $(SQS_QUERY_AWS)

DEV_DATA ?= .cirrusmq-data
dev: install  ## install, then start the local stack on $(DEV_DATA)/ (kept across restarts; ARGS=--ephemeral: memory only)
	$(VENV)/bin/cirrusmq dev --data-dir $(DEV_DATA) $(ARGS)

test: install $(SQS_QUERY_AWS)  ## install, then run the test suite (without the `deploy` tests), on both cores
	@echo "== make test, phase 1/2: the suite on 2 processes (about 20 minutes on 2 cores; [done/total] ends each line) =="
	$(VENV)/bin/pytest -n 2 --dist loadfile -m "not deploy and not serial" -o console_output_style=count $(ARGS)
	@echo "== make test, phase 2/2: the serial tests (the schemathesis fuzz, about 3 minutes) =="
	$(VENV)/bin/pytest -m serial -o console_output_style=count $(ARGS)

test-deploy: install $(SAM)  ## fresh-venv installs, the wheel, sam build + sam validate --lint
	CIRRUSMQ_SAM=$(SAM) CIRRUSMQ_REQUIRE_DEPLOY_TOOLS=1 $(VENV)/bin/pytest -m deploy $(ARGS)

$(MOTO_SUITE)/tests/test_sqs/test_sqs.py: $(MOTO_SUITE_PIN)
	mkdir -p $(COMPAT_DIR)
	$(VENV)/bin/pip download --quiet --no-deps --no-binary :all: --require-hashes \
	  -r $(MOTO_SUITE_PIN) -d $(COMPAT_DIR)
	rm -rf $(MOTO_SUITE) && tar -xzf $(COMPAT_DIR)/moto-$(MOTO_SUITE_VERSION).tar.gz -C $(COMPAT_DIR)
	touch $@

$(COMPAT_QUERY_STAMP):
	test -x $(COMPAT_QUERY_PY) || $(PYTHON) -m venv $(COMPAT_QUERY_VENV)
	$(COMPAT_QUERY_VENV)/bin/pip install --quiet "boto3==1.28.80" "botocore==1.31.80" \
	  "moto[server]==$(MOTO_SUITE_VERSION)" "freezegun==1.5.5" "pytest==9.2.0" "pytest-timeout==2.4.0"
	rm -f $(COMPAT_QUERY_VENV)/.installed-* && touch $@

$(LS_SUITE_STAMP): $(LS_SUITE_DIR)/requirements.txt
	@test -n "$(LS_SUITE_PYTHON)" || { echo "LocalStack's suite needs Python 3.13 (set LS_SUITE_PYTHON)"; exit 1; }
	test -x $(LS_SUITE_PY) || $(LS_SUITE_PYTHON) -m venv $(LS_SUITE_VENV)
	$(LS_SUITE_PY) -m pip install --quiet --no-deps -r $(LS_SUITE_DIR)/requirements.txt
	rm -f $(LS_SUITE_VENV)/.installed-* && touch $@

test-compat: test-compat-moto test-compat-localstack  ## both outside SQS conformance suites against a fresh local stack (docs/compat.md)

test-compat-moto: install $(MOTO_SUITE)/tests/test_sqs/test_sqs.py $(COMPAT_QUERY_STAMP)  ## moto's AWS-verified SQS tests, both protocols
	@test "$$($(VENV)/bin/python -c 'import moto; print(moto.__version__)')" = "$(MOTO_SUITE_VERSION)" \
	  || { echo "moto's tests need the installed moto $(MOTO_SUITE_VERSION)"; exit 1; }
	nice -n 10 timeout 1800 $(VENV)/bin/python tests/compat/outside/run_moto_sqs.py $(MOTO_SUITE) \
	  --python json=$(abspath $(VENV))/bin/python --python query=$(abspath $(COMPAT_QUERY_PY)) $(ARGS)

test-compat-localstack: install $(LS_SUITE_STAMP)  ## LocalStack's AWS-validated SQS tests (both protocols); prints "N of M applicable pass"
	nice -n 10 timeout 1800 $(VENV)/bin/python tests/compat/outside/run_localstack_sqs.py \
	  --python $(abspath $(LS_SUITE_PY)) --report $(COMPAT_DIR)/localstack-sqs.xml $(LS_ARGS)

sam-build: install $(SAM)  ## sam build into .aws-sam/build (no Docker needed)
	SAM_CLI_TELEMETRY=0 PYTHON=$(abspath $(VENV))/bin/python $(SAM) build $(ARGS)
	@echo "sam is $(abspath $(SAM)) (its own venv, not on PATH): run it by that path, e.g. $(SAM) deploy --guided"

front-door-routes: install  ## rewrite functions/front_door/routes.json from template.yaml's HttpApi routes
	$(VENV)/bin/python -m cirrusmq_local.front_door template.yaml

bench: install  ## core queue benchmark (figures in README.md)
	$(VENV)/bin/python tests/benchmarks/core_queue.py $(ARGS)

bench-report: install  ## run the benchmarks, write docs/benchmarks/ (ARGS="--quick": a few minutes)
	$(VENV)/bin/python tests/benchmarks/bench_report.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
