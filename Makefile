# The README's two commands: `make demo` and `make test`. Each does all of its own set-up.
SHELL := /bin/bash
PY := .venv/bin/python
APT_PKGS := libavutil57 libavcodec59 libavformat59 libavdevice59 libavfilter8 libswscale6 libswresample4 espeak-ng \
            chromium
STAMP := .venv/.installed

.PHONY: setup demo test test-fast lint bench gpu-smoke mutate docs clean

# System libraries: Debian's FFmpeg 5.1 (torchcodec 0.13 decodes dataset audio with it), espeak-ng, and chromium
# (the report's browser test drives it through playwright; no browser is downloaded). Checked again whenever this
# file changes (a package added to the list), without re-running the pip install below.
.system-deps: Makefile
	@if ! dpkg -s $(APT_PKGS) >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	fi
	@touch $@

$(STAMP): pyproject.toml | .system-deps
	@test -x $(PY) || python3 -m venv .venv
	@$(PY) -m pip install -q --upgrade pip
	# torch is pinned to the CPU range first, so nothing can pull a CUDA build.
	@$(PY) -m pip install -q "torch>=2.8,<2.14"
	@$(PY) -m pip install -q -e ".[dev]"
	# moshi declares torch<2.10 but runs on ours: installed without its declared dependencies (the [moshi] extra
	# above holds what it needs).
	@$(PY) -m pip install -q --no-deps moshi==0.2.13
	@touch $@

setup: $(STAMP)

demo: setup
	@$(PY) -m eval.cli demo --out out

# Every test, no marker filter (tests/test_test_commands.py checks that), on two pytest-xdist workers (pyproject's
# addopts; `-n 0` on the command line for one process). test-fast is the inner loop: the `fast` files alone (pure
# rules, known answers, schemas; tests/conftest.py FAST_FILES).
test: setup
	@$(PY) -m pytest -q

test-fast: setup
	@$(PY) -m pytest -q -m fast

lint: setup
	@.venv/bin/ruff check .

# Harness/VAD/memory figures, then each build's throughput against its TTS engine alone, Japanese speech, and
# batched lockstep episodes per second at B = 1, 4, 16 (benchmarks/README.md).
bench: setup
	@$(PY) benchmarks/bench_mpe.py
	@$(PY) benchmarks/bench_build.py
	@$(PY) benchmarks/bench_ifeval_build.py
	@$(PY) benchmarks/bench_ja_speech.py
	@$(PY) benchmarks/bench_batch.py

# The in-process adapters on their real weights (already in the local Hugging Face cache): 5 cases of every config,
# one at a time and batched, compared sample for sample, with step p50/p99 against the frame (docs/models.md#gpu-smoke).
# Without a CUDA GPU it refuses in one line with exit status 3.
gpu-smoke: setup
	@$(PY) benchmarks/gpu_smoke.py

# Mutation testing, on demand (not in CI): mutmut over the scoring rules, statistics, schedulers and gold answers
# ([tool.mutmut] in pyproject.toml, scope in tests/mutation_report.py), a fresh run each time (about 10 minutes on
# 2 cores), then killed/survived/score per module. Survivors are explained in tests/MUTATION.md.
MUTATE_STAMP := .venv/.installed-mutate
$(MUTATE_STAMP): $(STAMP)
	@$(PY) -m pip install -q -e ".[dev,mutate]"
	@touch $@

mutate: $(MUTATE_STAMP)
	@$(PY) tests/mutation_report.py --run

# The docs site: docs/ and the API reference (mkdocs.yml), built offline into site/ (git-ignored); --strict, so a
# broken link, a missing page or an unresolved API name fails the build.
docs: setup
	@$(PY) -m mkdocs build --strict --quiet
	@echo "docs: site/index.html"

clean:
	rm -rf out .cache .pytest_cache mutants site
