# gpuscope's one entry point for people and CI. `make help` lists the targets.
# Everything installs into .venv from the registries; nothing needs to be installed by hand
# beyond Rust, Python 3.11 and make.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum < requirements-dev.txt | cut -d' ' -f1)
DEMO_DIR := demo-run
SHARED := ../shared/data

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps HolisticTraceAnalysis==0.5.0
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP) ## create .venv with torch, tensorboard, maturin, pytest (once)

# The `gpuscope` command is the native binary, installed from a wheel of its own (as pip
# installs it from the gpuscope-cli package); the Python package depends on it.
build: setup ## build the engine, the CLI and the Python package (release)
	rm -rf target/cli-wheel
	$(VENV)/bin/maturin build --release --quiet -m crates/gpuscope-cli/Cargo.toml -o target/cli-wheel
	$(PY) -m pip install --quiet --force-reinstall --no-deps target/cli-wheel/gpuscope_cli-*.whl
	$(VENV)/bin/maturin develop --release --quiet
	@# A venv whose gpuscope package still owned a `gpuscope` script of its own loses the
	@# binary when develop replaces that package: put it back.
	test -x $(VENV)/bin/gpuscope || $(PY) -m pip install --quiet --force-reinstall --no-deps target/cli-wheel/gpuscope_cli-*.whl

demo: build ## train a tiny model on CPU twice (clean under gpuscope run, leaking), read what gpuscope recorded, analyse a real trace, allocator snapshot, nvidia-smi output and Nsight export, gate the leaking run against the clean one, and end with the diagnosis of the demo's own run
	rm -rf $(DEMO_DIR)
	$(VENV)/bin/gpuscope run --logdir $(DEMO_DIR)/clean -- $(PY) examples/tiny_train.py --profiling.wait 100 --profiling.active 3
	@echo "gpuscope run sampled the host and the training's process tree: $$(wc -l < $(DEMO_DIR)/clean/gpu.jsonl) samples in $(DEMO_DIR)/clean/gpu.jsonl"
	$(PY) examples/tiny_train.py --profile_dir $(DEMO_DIR)/leak --leak
	$(VENV)/bin/gpuscope tb $(DEMO_DIR)/clean/tensorboard --tags
	@echo
	@echo "Activations (MB) of the clean run, then of the leaking one:"
	$(VENV)/bin/gpuscope tb $(DEMO_DIR)/clean/tensorboard --tag TensorProfiling/Tensor_Category/activations_MB
	$(VENV)/bin/gpuscope tb $(DEMO_DIR)/leak/tensorboard --tag TensorProfiling/Tensor_Category/activations_MB
	@echo
	$(VENV)/bin/gpuscope report $(DEMO_DIR)/leak
	$(VENV)/bin/gpuscope report $(DEMO_DIR)/clean $(DEMO_DIR)/leak --format html -o $(DEMO_DIR)/report.html
	@echo "The same two runs side by side, with charts: $(DEMO_DIR)/report.html"
	@echo "The last block of the leaking run's tensor_profile text log:"
	tail -n 22 $(DEMO_DIR)/leak/profiles/tensor_profile_*.log
	@echo
	@echo "A real file from another tool (torch.utils.tensorboard on an A100 cluster):"
	$(VENV)/bin/gpuscope tb $(SHARED)/tfevents/pytorch_unet__events.out.tfevents.1738277380.wn44.22511.0
	@echo
	@echo "A real profiler trace (ResNet-50 on a V100, DataLoader with 0 workers):"
	$(VENV)/bin/gpuscope trace $(SHARED)/traces/resnet50_v100_memory_workers0.json.gz
	$(VENV)/bin/gpuscope trace $(SHARED)/traces/resnet50_v100_memory_workers0.json.gz --format html -o $(DEMO_DIR)/trace.html
	@echo "The same trace with charts: $(DEMO_DIR)/trace.html"
	@echo
	@echo "A real CUDA allocator snapshot (a language model's full training step, 51 GiB at the peak):"
	$(VENV)/bin/gpuscope snapshot $(SHARED)/snapshots/lm_fullstep_ctx128.pickle
	$(VENV)/bin/gpuscope snapshot $(SHARED)/snapshots/lm_fullstep_ctx128.pickle --format html -o $(DEMO_DIR)/snapshot.html
	@echo "The same snapshot with the timeline by call site and a segment map: $(DEMO_DIR)/snapshot.html"
	@echo
	@echo "This machine's GPUs and host (no GPU here: the host alone), then a saved A100 nvidia-smi -q -x with MIG:"
	$(VENV)/bin/gpuscope monitor --once
	$(VENV)/bin/gpuscope monitor --once --watch --from $(SHARED)/nvidia-smi/netdata__a100-sxm4-mig.xml
	@echo
	@echo "A real Nsight Systems 2026.1 export (nsys export --type sqlite), summarised as nsys stats does:"
	$(VENV)/bin/gpuscope nsys stats $(SHARED)/nsys/cuda_add_rtx4060ti_nsys2026.sqlite
	@echo
	@echo "The leaking run against the clean one, as a CI gate would judge it (exit 1: a regression):"
	$(VENV)/bin/gpuscope compare $(DEMO_DIR)/clean $(DEMO_DIR)/leak --fail-on peak-memory=10%,leak || test $$? -eq 1
	@echo
	@echo "Last, the diagnosis of this demo's own run: everything gpuscope run, the memory profiler and the profiler left in $(DEMO_DIR)/clean, ranked (the full report, with the evidence after it: gpuscope report $(DEMO_DIR)/clean):"
	$(VENV)/bin/gpuscope report $(DEMO_DIR)/clean | awk '/^TENSOR PROFILING SUMMARY/{exit} NR > 1 {print prev} {prev = $$0}'

test: shared-data build test-rs test-py lint check-fuzz test-install ## set everything up and run every test and check

shared-data: ## stop with one message when the shared real-GPU artifacts are not at ../shared/data
	@test -d $(SHARED) || { echo "make: the shared real-GPU artifacts are missing: $(SHARED) (expected beside the repository; the tests read them)" >&2; exit 1; }

test-rs: shared-data ## Rust unit and integration tests
	cargo test --workspace --exclude gpuscope-py

# GPUSCOPE_REQUIRE_SHARED=1: a test that needs a missing shared file fails instead of
# skipping (tests/_helpers.py); a plain `pytest` outside make and CI still skips it.
test-py: shared-data build chromium ## Python tests (pytest)
	GPUSCOPE_REQUIRE_SHARED=1 $(PY) -m pytest -q tests

# The fuzz target is its own workspace (cargo fuzz builds it with sanitizer flags), so
# `cargo test` and clippy never compile it: type-check it here on stable, without
# libFuzzer's C++ (--no-default-features), pinned to the workspace's Cargo.lock.
check-fuzz: ## type-check the pickle reader's fuzz target, so that an engine API change fails here
	cp Cargo.lock crates/gpuscope/fuzz/Cargo.lock
	cargo check --manifest-path crates/gpuscope/fuzz/Cargo.toml --no-default-features --target-dir target/fuzz-check

chromium: ## Debian's chromium, for the HTML report test (apt-get, once)
	bash scripts/install-chromium.sh

test-install: ## `pip install .` and `cargo install` into throwaway places, then run them
	PYTHON=$(PYTHON) bash scripts/check-install.sh

lint: setup ## formatting, clippy, type stubs
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff format --check python tests bench examples
	$(VENV)/bin/ruff check python tests bench examples
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest gpuscope._native

fmt: setup ## format Rust and Python sources
	cargo fmt --all
	$(VENV)/bin/ruff format python tests bench examples

bench: build ## side-by-side benchmarks against the tools people use today
	bash bench/run.sh

clean: ## remove build outputs and the demo run (keeps .venv)
	cargo clean
	rm -rf $(DEMO_DIR)

.PHONY: help setup build demo test shared-data test-rs test-py check-fuzz chromium test-install lint fmt bench clean
