PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTOC := $(PY) -m grpc_tools.protoc

.PHONY: test demo install proto bench clean

# The venv is rebuilt only when the package metadata changes.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[tf,dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile

# Regenerates the committed protobuf modules from the .proto schemas.
proto: $(STAMP)
	$(PY) tools/gen_proto.py

bench: $(STAMP)
	$(PY) bench/bench_type_interning.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
