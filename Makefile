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

.PHONY: install dev test test-deploy test-compat sam-build bench lint sqs-query-clients

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

dev: install  ## install, then start the local stack (Ctrl-C stops it)
	$(VENV)/bin/cirrusmq dev $(ARGS)

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

test-compat: install $(MOTO_SUITE)/tests/test_sqs/test_sqs.py $(COMPAT_QUERY_STAMP)  ## moto's AWS-verified SQS tests against a fresh local stack, both protocols (docs/compat.md)
	@test "$$($(VENV)/bin/python -c 'import moto; print(moto.__version__)')" = "$(MOTO_SUITE_VERSION)" \
	  || { echo "moto's tests need the installed moto $(MOTO_SUITE_VERSION)"; exit 1; }
	nice -n 10 timeout 1800 $(VENV)/bin/python tests/compat/outside/run_moto_sqs.py $(MOTO_SUITE) \
	  --python json=$(abspath $(VENV))/bin/python --python query=$(abspath $(COMPAT_QUERY_PY)) $(ARGS)

sam-build: install $(SAM)  ## sam build into .aws-sam/build (no Docker needed)
	SAM_CLI_TELEMETRY=0 PYTHON=$(abspath $(VENV))/bin/python $(SAM) build $(ARGS)
	@echo "sam is $(abspath $(SAM)) (its own venv, not on PATH): run it by that path, e.g. $(SAM) deploy --guided"

bench: install  ## core queue benchmark (figures in README.md)
	$(VENV)/bin/python tests/benchmarks/core_queue.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
