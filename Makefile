# nerzoo: `make train` and `make test` each set everything up on a fresh machine.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
ALLENNLP := $(VENV)/bin/allennlp
STAMP := $(VENV)/.nerzoo-installed
RUN_DIR ?= runs/deptree_ner
CONFIG ?= training_config/deptree_ner.jsonnet
SENTENCE ?= Peter Blackburn visited Brussels on Monday with Anna Keller of Norvik Bank .
# The 18 dev sentences of the fixtures reach dev F1 1.0 after an epoch or two, and the trainer keeps
# the first best epoch, still underfitted: on the fixtures keep the epoch of lowest dev loss instead.
TRAIN_OVERRIDES ?= {"trainer.validation_metric": "-loss"}

.PHONY: install install-bench train test clean

install: $(STAMP)

# allennlp 2.10.1 pins torch<1.13 and friends, which do not exist for Python 3.11: uv installs it
# with the newer versions listed in overrides.txt. allennlp imports fairscale and torch.jit APIs that
# torch 2 deprecates; nerzoo/quiet_warnings.pth silences those FutureWarnings in this venv, which
# every allennlp command would otherwise print. Re-runs only when the recipe's inputs change.
$(STAMP): setup.cfg pyproject.toml overrides.txt nerzoo/quiet_warnings.pth
	test -x $(PYTHON) || python3 -m venv $(VENV)
	test -x $(VENV)/bin/uv || $(PYTHON) -m pip install --quiet uv
	$(VENV)/bin/uv pip install --python $(PYTHON) -e '.[dev]' --override overrides.txt
	cp nerzoo/quiet_warnings.pth "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/nerzoo-quiet-warnings.pth"
	touch $(STAMP)

# The benchmarks' extra (allennlp-models, for the reference crf_tagger).
install-bench: install
	$(VENV)/bin/uv pip install --python $(PYTHON) -e '.[dev,bench]' --override overrides.txt

train: install
	$(ALLENNLP) train $(CONFIG) -s $(RUN_DIR) -f --include-package nerzoo -o '$(TRAIN_OVERRIDES)'
	$(ALLENNLP) evaluate $(RUN_DIR)/model.tar.gz fixtures/conll2003/test.txt --include-package nerzoo \
		--output-file $(RUN_DIR)/evaluation.json
	$(ALLENNLP) tag-text $(RUN_DIR)/model.tar.gz "$(SENTENCE)" --include-package nerzoo

# Parallel workers (pytest-xdist, one per core, at most 4); tests sharing a trained model stay on one
# worker. The suite starts dozens of Python processes that import torch and allennlp: they keep
# their compiled bytecode even where PYTHONDONTWRITEBYTECODE is set, or each one recompiles it all.
test: install
	PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n auto --maxprocesses 4 --dist loadgroup tests

clean:
	rm -rf runs .pytest_cache
