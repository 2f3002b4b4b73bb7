#!/usr/bin/env bash
# Runs gpuscope's benchmarks with the repository's venv (called by `make bench`).
# Options: BENCH_WRITE_ARGS / BENCH_READ_ARGS / BENCH_MEMORY_ARGS / BENCH_REPORT_ARGS /
# BENCH_TRACE_ARGS / BENCH_SNAPSHOT_ARGS / BENCH_SNAPSHOT_HTML_ARGS / BENCH_SECTIONS_ARGS /
# BENCH_GRADIENTS_ARGS / BENCH_HOOKS_ARGS / BENCH_NOTEBOOK_ARGS / BENCH_CRITICAL_PATH_ARGS /
# BENCH_MEMORY_TIMELINE_ARGS / BENCH_RANKS_ARGS / BENCH_CONSOLE_ARGS (passed to each script), e.g.
#   BENCH_WRITE_ARGS="--n 50000 --repeat 3" bench/run.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
cd "$repo"

if [[ ! -x "$python" ]]; then
    echo "no venv python at $python (set PYTHON=...)" >&2
    exit 1
fi

# bench_trace.py's rival, Holistic Trace Analysis, gets a venv of its own outside the
# repository (it pulls pandas, plotly, ...): created here once, reused afterwards.
hta_venv="${HTA_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope-bench/hta-venv}"
hta_package="HolisticTraceAnalysis==0.5.0"

echo "== building the release CLI (cargo build --release -p gpuscope-cli)"
cargo build --release -p gpuscope-cli

echo "== machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpus: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
echo "ram:  $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
"$python" -c 'import sys, gpuscope, torch, tensorboard, tbparse; print(f"python {sys.version.split()[0]}, gpuscope {gpuscope.__version__}, torch {torch.__version__}, tensorboard {tensorboard.__version__}, tbparse {tbparse.__version__}")'

# Runs bench/NAME with the options in the environment variable VAR.
bench() {
    local name="$1" var="$2"
    shift 2
    echo
    echo "== $name ${!var:-}"
    # shellcheck disable=SC2086
    "$python" "bench/$name" "$@" ${!var:-}
}

bench bench_tb_write.py BENCH_WRITE_ARGS
bench bench_tb_read.py BENCH_READ_ARGS
bench bench_memory_record.py BENCH_MEMORY_ARGS
bench bench_report.py BENCH_REPORT_ARGS

if ! "$hta_venv/bin/python" -c 'import hta' 2>/dev/null; then
    echo "== creating $hta_venv ($hta_package from PyPI)"
    "$python" -m venv "$hta_venv"
    "$hta_venv/bin/python" -m pip install --quiet "$hta_package"
fi
bench bench_trace.py BENCH_TRACE_ARGS --hta-venv "$hta_venv"
bench bench_snapshot.py BENCH_SNAPSHOT_ARGS
bench bench_snapshot_html.py BENCH_SNAPSHOT_HTML_ARGS
bench bench_sections.py BENCH_SECTIONS_ARGS
bench bench_gradients.py BENCH_GRADIENTS_ARGS
bench bench_hooks.py BENCH_HOOKS_ARGS
bench bench_notebook.py BENCH_NOTEBOOK_ARGS

# HTA's critical path fails with pandas 3: its side runs in a venv with pandas 2.2.
hta_pandas2_venv="${HTA_PANDAS2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope-bench/hta-pandas2-venv}"
if ! "$hta_pandas2_venv/bin/python" -c 'import hta' 2>/dev/null; then
    echo "== creating $hta_pandas2_venv ($hta_package, pandas 2.2.3, NumPy 1.26 from PyPI)"
    "$python" -m venv "$hta_pandas2_venv"
    "$hta_pandas2_venv/bin/python" -m pip install --quiet "$hta_package" "pandas==2.2.3" "numpy<2"
fi
bench bench_critical_path.py BENCH_CRITICAL_PATH_ARGS --hta-python "$hta_pandas2_venv/bin/python"
bench bench_memory_timeline.py BENCH_MEMORY_TIMELINE_ARGS
bench bench_ranks.py BENCH_RANKS_ARGS
bench bench_console.py BENCH_CONSOLE_ARGS
