# The two commands of the README: `make demo` and `make test`. Both set up a fresh machine first.
# `make demo` installs only what the demo needs; `make test` adds the training stack (torch, MONAI, nnU-Net).
.PHONY: setup setup-demo demo test test-only lint bench bench-scale reliability-figures bench-plot

setup:
	bash .ci/setup

setup-demo:
	bash .ci/setup --demo

demo: setup-demo
	PYTHONUTF8=1 .venv/bin/amid demo

test: setup
	$(MAKE) test-only

test-only:
	PYTHONUTF8=1 AMID_NPM_PREFIX=$${AMID_NPM_PREFIX:-$$HOME/.cache/amid/npm} .venv/bin/python -m pytest

lint:
	.venv/bin/python -m ruff check . && .venv/bin/python -m ruff format --check . && .venv/bin/python -m mypy

bench:
	.venv/bin/python benchmarks/serve_ready.py
	.venv/bin/python benchmarks/tools_list_size.py

# How cost grows (issue 25): data, ledger, agents, reviews and jobs at 10x and 100x, each beside its reference
# in the same run, into benchmarks/results/*_growth.json (sized for about 30 minutes on 2 cores).
bench-scale:
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/data_growth.py
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/ledger_growth.py
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/agents_growth.py
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/reviews_growth.py
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/jobs_growth.py
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/plot.py

# The growth benchmarks' results as one figure (benchmarks/results/growth.png).
bench-plot:
	PYTHONUTF8=1 .venv/bin/python benchmarks/scale/plot.py

# The crash, attack and fuzz suites at full size, then the README's figures table from their results.
reliability-figures:
	PYTHONUTF8=1 .venv/bin/python benchmarks/reliability/crash.py
	PYTHONUTF8=1 .venv/bin/python benchmarks/reliability/attacks.py
	test ! -f benchmarks/reliability/fuzz.py || PYTHONUTF8=1 .venv/bin/python benchmarks/reliability/fuzz.py
	.venv/bin/python benchmarks/reliability/figures.py
