# fluxlite: `make start` brings up a 4-broker instance; `make test` runs the tests.
# Both create the virtualenv they need under .venv on first use.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup start demo lint test test-unit test-integration bench fuzz chaos demo-resilience clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# byte-compile the package: PYTHONDONTWRITEBYTECODE is set on some machines,
# and recompiling on every command would cost start-up time
setup: $(STAMP)
	@$(PY) -m compileall -q fluxlite >/dev/null
	@if pkg-config --exists pmix 2>/dev/null; then \
	    $(PY) -m fluxlite.pmi.pmix_build >/dev/null 2>&1 || \
	    echo "note: building the PMIx server module failed (Open MPI jobs need it)" >&2; fi

start: setup
	@if [ -t 0 ]; then exec bin/fluxlite start --size 4; else exec bin/fluxlite-demo; fi

demo: setup
	bin/fluxlite-demo

# make exits 2 whatever pytest's status was; with PYTEST_STATUS_FILE=PATH the
# status itself is written there (.ci/run tells 5, "no tests collected", apart)
# style and errors (ruff, configured in pyproject.toml) and dead code (vulture)
lint: setup
	$(VENV)/bin/ruff check -q $(wildcard fluxlite tests bench)
	$(VENV)/bin/vulture fluxlite .ci/vulture-allow.py --min-confidence 60 \
	    --ignore-decorators "@handler,@*.command,@*.group,@click.*,@property,@*.def_extern" \
	    --ignore-names "__getattr__,_cmd_*" --exclude "*/fluxlite/testing/*"

test: setup lint
	$(PY) -m pytest -q tests; rc=$$?; \
	if [ -n "$(PYTEST_STATUS_FILE)" ]; then echo $$rc >"$(PYTEST_STATUS_FILE)"; fi; exit $$rc

test-unit: setup
	$(PY) -m pytest -q tests/unit

test-integration: setup
	$(PY) -m pytest -q tests/integration

bench: setup
	$(PY) bench/run.py

# longer runs of the attack and chaos tests the suite runs briefly
fuzz: setup
	FLUXLITE_FUZZ_SECONDS=$${FLUXLITE_FUZZ_SECONDS:-30} $(PY) -m pytest -q -s tests/integration/test_fuzz.py

chaos: setup
	FLUXLITE_CHAOS_JOBS=$${FLUXLITE_CHAOS_JOBS:-1000} FLUXLITE_CHAOS_KILLS=$${FLUXLITE_CHAOS_KILLS:-4} $(PY) -m pytest -q -s tests/integration/test_chaos.py

demo-resilience: setup
	bin/fluxlite-demo-resilience

clean:
	rm -rf $(VENV) .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
