PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help demo test test-debug dev bench clean

help:
	@echo "make demo   - train a chain structural SVM on the embedded OCR sample and print results"
	@echo "make test   - run the test suite"
	@echo "make bench  - run the benchmarks (needs ../shared/data)"
	@echo "make clean  - remove build products"

$(PY):
	$(PYTHON) -m venv $(VENV)

PYX := $(wildcard sklstruct/*/*.pyx sklstruct/*/*/*.pyx sklstruct/*.pxd sklstruct/*/*.pxd sklstruct/*/*/*.pxd)

$(STAMP): $(PY) pyproject.toml setup.py $(PYX)
	$(PY) -m pip install -q -U pip "setuptools>=77" wheel "Cython>=3.1" "numpy>=2"
	$(PY) -m pip install -q --no-build-isolation -e ".[tests]"
	touch $(STAMP)

dev: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest

test-debug: $(PY)
	SKLSTRUCT_CYTHON_DEBUG=1 $(PY) -m pip install -q --no-build-isolation -e ".[tests]"
	$(PY) -m pytest
	rm -f $(STAMP)

bench: $(STAMP)
	$(PY) -m pip install -q ".[benchmarks]" --no-build-isolation
	$(PY) benchmarks/bench_oracles.py
	$(PY) benchmarks/bench_chunking.py

clean:
	rm -rf build *.egg-info
	find sklstruct -name "*.c" -o -name "*.so" -o -name "*.html" | xargs rm -f
