#!/usr/bin/env bash
# Install what the tests need, then run every check and test: Rust (fmt, clippy,
# unit and integration tests) and Python (ruff, mypy --strict, stubtest, pytest).
# The differential tests compare beanpole with Debian's beanstalkd, installed here
# when this runs as root on a Debian-like machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v beanstalkd >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq beanstalkd >/dev/null
    else
        echo "note: beanstalkd is not installed; tests against it will be skipped" >&2
    fi
fi
# tmux runs `beanpole top` in a real terminal for its live-view test.
if ! command -v tmux >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
fi

# The dashboard's browser tests (marker `browser`) drive Debian's chromium through
# chromium-driver (selenium, from the test extra, talks to it).
if ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "note: chromium-driver is not installed; the browser tests will be skipped" >&2
    fi
fi

# The Spark tests (tests/spark) need a Java runtime for pyspark: the release's default
# one (17 on Debian 12, 21 on Debian 13; pyspark 4 runs on both).
if ! command -v java >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null
    else
        echo "note: java is not installed; the Spark tests will be skipped" >&2
    fi
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# Without the native module most test modules would skip and the run would look green.
if ! python3 -c 'import beanpole._core' 2>/dev/null; then
    echo "error: beanpole._core does not import; the native module was not built:" >&2
    python3 -c 'import beanpole._core' >&2 || true
    exit 1
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
cargo test --workspace -q

python3 -m ruff check python tests bench examples
python3 -m mypy --strict python/beanpole
python3 -m mypy.stubtest beanpole._core
# A whole run must execute at least MIN_TESTS tests (not skipped): a missing browser,
# beanstalkd or Java skips some modules, but never most of the suite. A run of chosen
# tests ("$@" given) is not counted. pytest includes tests/test_wheel.py (marker
# `wheel`): it builds the release wheel with scripts/wheel.sh unless dist/ holds one
# newer than every source (a few minutes), then installs it into fresh venvs without
# cargo or rustc. `-m "not wheel"` leaves it out.
MIN_TESTS="${BEANPOLE_MIN_TESTS:-900}"
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
python3 -m pytest -q -p no:cacheprovider --junitxml="$report" "$@"
if [ "$#" = 0 ]; then
    python3 scripts/count_tests.py "$report" "$MIN_TESTS"
fi
