#!/usr/bin/env bash
# Rebuild the native module in place for an editable install (pip install -e .):
# faster than reinstalling when only Rust changed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p beanpole-python
# Replace by rename: a running server keeps the old library mapped intact.
cp "${CARGO_TARGET_DIR:-target}/release/lib_core.so" python/beanpole/.core.tmp.so
mv -f python/beanpole/.core.tmp.so python/beanpole/_core.abi3.so
# Byte-compile the Python package as an install would: where PYTHONDONTWRITEBYTECODE is
# set, nothing else ever writes __pycache__, and every start would compile the sources.
"${PYTHON:-python3}" -m compileall -q python/beanpole
