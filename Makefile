PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help demo test test-debug dev bench clean doc doc-nogallery

help:
	@echo "make demo   - train a chain structural SVM on the embedded OCR sample and print results"
	@echo "make test   - run the test suite"
	@echo "make dev    - build the extensions in place and install the package editable into .venv"
	@echo "make test-debug - the test suite on a build with Cython's bounds and wraparound checks"
	@echo "make bench  - run the benchmarks (needs ../shared/data)"
	@echo "make doc    - build the documentation with the example gallery into doc/_build/html"
	@echo "              (downloads CoNLL-2000 for the gallery when it is missing)"
	@echo "make doc-nogallery - the same without running the examples (what CI builds)"
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

# the stamp goes first: whatever the tests do, the next `make dev` rebuilds without the checks
test-debug: $(PY)
	rm -f $(STAMP)
	SKLSTRUCT_CYTHON_DEBUG=1 $(PY) -m pip install -q --no-build-isolation -e ".[tests]"
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m pip install -q --no-build-isolation -e ".[benchmarks]"
	$(PY) benchmarks/bench_oracles.py
	$(PY) benchmarks/bench_chunking.py

# the documentation: Sphinx with warnings as errors; the gallery runs examples/plot_*.py
DOCS_STAMP := $(VENV)/.docs-installed
SPHINXBUILD := $(VENV)/bin/sphinx-build
SPHINXOPTS ?=
DOC_BUILD := doc/_build

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs'], sep=chr(10))" > $(VENV)/docs-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/docs-requirements.txt
	touch $(DOCS_STAMP)

# the gallery's data home, as examples/plot_conll_chunker.py picks it: $SKLSTRUCT_DATA, else
# ../shared/data beside the project when it holds CoNLL-2000, else ~/sklstruct_data. Before
# Sphinx runs that example (every example, unless EXAMPLES_PATTERN says otherwise), the
# fetcher downloads CoNLL-2000 there when it is missing, or stops the build with its message.
GALLERY_DATA := $(or $(SKLSTRUCT_DATA),$(if $(wildcard ../shared/data/conll2000),$(abspath ../shared/data)),$(HOME)/sklstruct_data)

doc: $(DOCS_STAMP)
	@if [ -z "$$EXAMPLES_PATTERN" ] || echo examples/plot_conll_chunker.py | grep -Eq -- "$$EXAMPLES_PATTERN"; then \
	  SKLSTRUCT_DATA="$(GALLERY_DATA)" $(PY) -m sklstruct.datasets.fetch conll2000 || { \
	    echo "make doc: the example gallery reads CoNLL-2000 (examples/plot_conll_chunker.py);" \
	      "'make doc-nogallery' builds the documentation without running the examples." >&2; \
	    exit 1; }; \
	fi
	SKLSTRUCT_DATA="$(GALLERY_DATA)" MPLBACKEND=Agg $(SPHINXBUILD) -W --keep-going -b html -d $(DOC_BUILD)/doctrees $(SPHINXOPTS) doc $(DOC_BUILD)/html

# the gallery pages without running the examples; their run markers (.md5) are dropped so that
# the next `make doc` runs the examples again instead of keeping these output-less pages
doc-nogallery: $(DOCS_STAMP)
	rm -f doc/auto_examples/*.md5
	$(SPHINXBUILD) -W --keep-going -b html -d $(DOC_BUILD)/doctrees-nogallery -D plot_gallery=0 $(SPHINXOPTS) doc $(DOC_BUILD)/html-nogallery

clean:
	rm -rf build *.egg-info
	rm -f $(STAMP)  # (the next make dev rebuilds the removed extensions)
	find sklstruct -name "*.c" -o -name "*.so" -o -name "*.html" | xargs rm -f
	rm -rf doc/_build doc/auto_examples doc/generated doc/_api_listing.rst doc/sg_execution_times.rst
