#!/usr/bin/env bash
# Writes what gpuscope says of every shared artifact (JSON, text, HTML) into one directory,
# so that a refactoring can be checked byte for byte:
#
#   scripts/outputs.sh /tmp/before            # on the commit before
#   scripts/outputs.sh /tmp/after             # on the commit after
#   diff -r /tmp/before /tmp/after
#
# Uses target/release/gpuscope (GPUSCOPE_BIN to override) and ../shared/data (SHARED_DATA).
set -uo pipefail

out=${1:?usage: scripts/outputs.sh OUT_DIR}
bin=${GPUSCOPE_BIN:-target/release/gpuscope}
data=${SHARED_DATA:-../shared/data}
[[ -x $bin ]] || { echo "no $bin: run cargo build --release -p gpuscope-cli" >&2; exit 2; }
[[ -d $data ]] || { echo "no $data" >&2; exit 2; }
mkdir -p "$out"

# One output: NAME then the arguments; stdout, stderr and the exit code go to NAME.*.
say() {
    local name=$1
    shift
    "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"
    echo $? >"$out/$name.rc"
}

both() {
    local name=$1
    shift
    say "$name.json" "$@" --format json
    say "$name.text" "$@" --format text
}

# JSON and text, and the page of the commands that make one.
all() {
    both "$@"
    local name=$1
    shift
    say "$name.html" "$@" --format html
}

for run in "$data"/gpu-h200/*/; do
    name=$(basename "$run")
    [[ -d $run/profiles ]] && all "report.$name" report "$run"
    [[ -d $run/tensorboard ]] && both "tb.$name" tb "$run/tensorboard"
    for trace in "$run"/profiler_traces/*; do
        [[ -e $trace ]] && all "trace.$name" trace "$trace"
    done
    for snap in "$run"/snapshots/*.pickle; do
        [[ -e $snap ]] && all "snapshot.$name" snapshot "$snap"
    done
done
both report.log report "$data"/logs/tensor_profile_*.log
all report.compare report "$data"/gpu-h200/lm_clean "$data"/gpu-h200/lm_leak_nan
for f in "$data"/tfevents/*tfevents*; do
    name=$(basename "$f")
    both "tb.$name" tb "$f"
    both "report.$name" report "$f"
done
for f in "$data"/traces/*.json.gz; do
    name=$(basename "$f" .json.gz)
    all "trace.$name" trace "$f"
    say "trace.$name.hta.json" trace "$f" --hta-compat --format json
done
all trace.memory_timeline trace "$data"/traces/memory_timeline.raw.gz
both trace.diff trace "$data"/traces/sampled_rank0.json.gz --diff "$data"/traces/sampled_rank1.json.gz
for f in "$data"/snapshots/*.pickle; do
    name=$(basename "$f" .pickle)
    all "snapshot.$name" snapshot "$f"
    say "snapshot.$name.notrace.json" snapshot "$f" --no-trace --format json
    say "snapshot.$name.request.json" snapshot "$f" --request 2GiB --format json
done
all snapshot.diff snapshot "$data"/snapshots/finetune_no_timestamps.pickle --diff "$data"/snapshots/lm_fullstep_ctx128.pickle
for f in "$data"/nsys/*.sqlite; do
    all "nsys.$(basename "$f")" nsys stats "$f"
done
for f in "$data"/nvidia-smi/* "$data"/gpu-h200/nvidia-smi/*; do
    say "monitor.$(basename "$f").json" monitor --from "$f" --once --format json
    say "monitor.$(basename "$f").text" monitor --from "$f" --once
done
# The sample's time and the host beside a saved output are this machine's, now.
sed -i -E 's/"time":[0-9.]+,//; s/"host":\{[^}]*\}//' "$out"/monitor.*.json.out
sed -i -E '/^Host CPU/d; s/ \| Host CPU.*//' "$out"/monitor.*.text.out
say bad.report.json report /nonexistent --format json
say bad.trace.json trace "$data"/README.md --format json
