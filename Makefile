PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTOC := $(PY) -m grpc_tools.protoc

.PHONY: test lint demo install proto bench bench-large bench-fuzz clean

DEMO_MODEL := testdata/bert_tiny.pb
DEMO_SHAPES := --input-shape "input_ids:1,32;input_mask:1,32;token_type_ids:1,32" \
               --input-shape "input_ids:8,32;input_mask:8,32;token_type_ids:8,32"

# The venv is rebuilt only when the package metadata changes.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[tf,dev]'
	touch $(STAMP)

install: $(STAMP)

# Lint (ruff: pyflakes, pycodestyle errors, isort, bugbear) and type-check (mypy, strict for ir/ and scope/).
lint: $(STAMP)
	$(VENV)/bin/ruff check scopefusion tests bench tools testdata
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest -q -n 2 --dist loadfile

# Converts the bundled BERT-like model with two shape profiles and prints the summary.
demo: $(STAMP)
	mkdir -p out
	$(VENV)/bin/scopefusion convert $(DEMO_MODEL) -o out/bert_tiny.ge $(DEMO_SHAPES) --report out/bert_tiny.report.json

# Regenerates the committed protobuf modules from the .proto schemas.
proto: $(STAMP)
	$(PY) tools/gen_proto.py

# Quick measurements: type interning, the scope layer at 10k-1M nodes, the model zoo's plans, verify per model.
bench: $(STAMP)
	$(PY) bench/bench_type_interning.py
	$(PY) bench/bench_scope.py
	$(PY) bench/model_zoo_report.py
	$(PY) bench/verify_zoo.py

# Parse and convert speed and memory against the protobuf floor on ResNet50 and a BERT-base encoder
# (builds ~550 MB of frozen models in a temporary directory).
bench-large: $(STAMP)
	$(PY) bench/bench_parser.py
	$(PY) bench/bench_convert.py
	$(PY) bench/bench_savedmodel.py
	$(PY) bench/bench_onnx_export.py

# Hostile-model fuzzing: 10,000 examples under a 4 GiB address-space limit, peak memory under 1.5 GiB.
bench-fuzz: $(STAMP)
	$(PY) bench/fuzz_hostile.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
