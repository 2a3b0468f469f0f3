#!/usr/bin/env bash
# Build what `pip install beanpole` installs without a Rust toolchain: a manylinux
# wheel (abi3, so one wheel serves CPython 3.11 and later) and the sdist, into dist/.
#
#   bash scripts/wheel.sh              # x86_64 wheel + sdist
#   bash scripts/wheel.sh --aarch64    # also an aarch64 wheel (needs the aarch64 Rust
#                                      # std: rustup target add aarch64-unknown-linux-gnu)
#
# zig (the `ziglang` package from PyPI) links against the glibc of the manylinux
# floor, so no manylinux container is needed; `auditwheel show` then confirms the tag.
# The wheel carries the `beanpole` command, the native module, its type stubs and
# py.typed, the dashboard's static files and THIRD_PARTY_NOTICES (the licence texts
# of the Rust crates linked into the module, kept current by scripts/third_party.py).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
# glibc 2.17: manylinux2014, what pip on any still-supported distribution accepts.
MANYLINUX=manylinux_2_17
TARGETS=(x86_64-unknown-linux-gnu)
for arg in "$@"; do
    case "$arg" in
        --aarch64) TARGETS+=(aarch64-unknown-linux-gnu) ;;
        *) echo "usage: bash scripts/wheel.sh [--aarch64]" >&2; exit 2 ;;
    esac
done

# The build tools, from PyPI, where missing.
"$PY" - <<'EOF' || "$PY" -m pip install -q --disable-pip-version-check \
    "maturin>=1.5,<2" "ziglang>=0.13" "auditwheel>=6"
import importlib.util, sys
sys.exit(any(importlib.util.find_spec(m) is None for m in ("maturin", "ziglang", "auditwheel")))
EOF

# maturin looks for a `zig` command: one that runs the ziglang package's zig.
PY=$("$PY" -c 'import sys; print(sys.executable)')
ZIG_BIN=$(mktemp -d)
trap 'rm -rf "$ZIG_BIN"' EXIT
printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$PY" >"$ZIG_BIN/zig"
chmod +x "$ZIG_BIN/zig"
export PATH="$ZIG_BIN:$(dirname "$PY"):$PATH"
# `python -m maturin` needs the maturin script beside that python; else the one on PATH.
if "$PY" -m maturin --version >/dev/null 2>&1; then
    MATURIN=("$PY" -m maturin)
else
    MATURIN=(maturin)
fi

# The licence notice must match Cargo.lock before it ships.
"$PY" scripts/third_party.py --check

mkdir -p dist
rm -f dist/beanpole-*.whl dist/beanpole-*.tar.gz
for target in "${TARGETS[@]}"; do
    "${MATURIN[@]}" build --release --zig --target "$target" \
        --compatibility "$MANYLINUX" --out dist
done
"${MATURIN[@]}" sdist --out dist

status=0
for target in "${TARGETS[@]}"; do
    arch=${target%%-*}
    for wheel in dist/beanpole-*_"$arch".whl; do
        report=$("$PY" -m auditwheel show "$wheel")
        echo "$report"
        if ! grep -q "\"${MANYLINUX}_${arch}\"" <<<"$report"; then
            echo "wheel.sh: $wheel is not $MANYLINUX" >&2
            status=1
        fi
    done
done
ls -l dist/beanpole-*
exit $status
