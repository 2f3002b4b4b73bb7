#!/usr/bin/env bash
# Checks the two ways a user installs gpuscope, from this checkout:
#   pip install ./crates/gpuscope-cli . -> `import gpuscope` and a working `gpuscope` command
#                                          (the native binary, from the gpuscope-cli wheel
#                                          the package depends on)
#   cargo install --path crates/gpuscope-cli -> the same CLI without Python
# Both into throwaway locations under target/, reusing the build cache.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
work=target/install-check
rm -rf "$work" && mkdir -p "$work"

"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet ./crates/gpuscope-cli .
# No torch in this venv: importing gpuscope and running its command must not need it.
"$work/venv/bin/python" -c 'import gpuscope, sys; assert "torch" not in sys.modules; print("import gpuscope", gpuscope.__version__)'
"$work/venv/bin/gpuscope" --version
# The command is the binary itself, not a Python script that loads the engine.
test "$(head -c 4 "$work/venv/bin/gpuscope" | od -An -c | tr -d ' ')" = '177ELF'
"$work/venv/bin/python" -m gpuscope --version
"$work/venv/bin/gpuscope" tb ../shared/data/tfevents/pytorch_unet__events.out.tfevents.1738277380.wn44.22511.0 --tags >/dev/null
echo "pip install ./crates/gpuscope-cli .: ok"

cargo install --quiet --path crates/gpuscope-cli --root "$work/cargo" --target-dir target
"$work/cargo/bin/gpuscope" --version
echo "cargo install --path crates/gpuscope-cli: ok"
