#!/usr/bin/env bash
# What the in-training hooks (issue #26) still need measured on a GPU, in one run of a lent
# GPU machine: the CUDA no-synchronisation test under set_sync_debug_mode("error") and the
# cuBLAS-workspace snapshot test, the hooks' overhead on the GPU-bound model against the
# 1.01x target, and the allocator history's stacks "python" against "all" at record and at
# dump. At most about 9.5 minutes (each step has its own limit), plus the machine's start.
#
# Prepare here, from the project root (the GPU machine reaches no registry; the wheel is
# abi3, so it installs on its Python 3.12):
#   mkdir -p .gpu && cp ../shared/gpu/overhead.py .gpu/ && .venv/bin/maturin build --release -o .gpu/
# then, there, with .gpu carried along: bash bench/gpu_round.sh
# Everything lands in $OUT/log.txt; record the figures in bench/README.md and the README's
# GPU table, with the card's name.
set -u
O=${OUT:-/tmp/out}
mkdir -p "$O"
exec > >(tee "$O/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
step() {
    local limit=$1 name=$2
    shift 2
    echo
    echo "=== [$SECONDS s] $name"
    timeout -k 5 "$limit" "$@"
    echo "=== rc=$? ($name)"
}

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), host $(hostname)"
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, torch.cuda.get_device_name(0))'
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/*.whl || echo "WHEEL INSTALL FAILED"
export PYTHONPATH=/tmp/site
step 100 "CUDA tests: no sync between records, snapshots on a GPU" \
    python3 -m pytest -q -p no:cacheprovider tests/test_hook_syncs.py tests/test_snapshot.py -k "cuda or gpu"
step 300 "hooks' overhead: overhead.py big 40 4" python3 .gpu/overhead.py big 40 4
step 170 "allocator history stacks: bench_history_stacks.py" \
    python3 bench/bench_history_stacks.py --size big --iterations 30 --rounds 3
echo "=== done at $SECONDS s"
