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

.PHONY: install dev test test-deploy sam-build bench lint sqs-query-clients

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
	$(VENV)/bin/pytest -n 2 --dist loadfile -m "not deploy and not serial" $(ARGS)
	$(VENV)/bin/pytest -m serial $(ARGS)

test-deploy: install $(SAM)  ## fresh-venv installs, the wheel, sam build + sam validate --lint
	CIRRUSMQ_SAM=$(SAM) CIRRUSMQ_REQUIRE_DEPLOY_TOOLS=1 $(VENV)/bin/pytest -m deploy $(ARGS)

sam-build: install $(SAM)  ## sam build into .aws-sam/build (no Docker needed)
	SAM_CLI_TELEMETRY=0 PYTHON=$(abspath $(VENV))/bin/python $(SAM) build $(ARGS)

bench: install  ## core queue benchmark (figures in README.md)
	$(VENV)/bin/python tests/benchmarks/core_queue.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
