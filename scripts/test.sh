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

# The Spark tests (tests/spark) need a Java runtime for pyspark.
if ! command -v java >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    else
        echo "note: java is not installed; the Spark tests will be skipped" >&2
    fi
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
cargo test --workspace -q

python3 -m ruff check python tests bench examples
python3 -m mypy --strict python/beanpole
python3 -m mypy.stubtest beanpole._core
# pytest includes tests/test_wheel.py (marker `wheel`): it builds the release wheel with
# scripts/wheel.sh unless dist/ holds one newer than every source (a few minutes), then
# installs it into fresh venvs without cargo or rustc. `-m "not wheel"` leaves it out.
python3 -m pytest -q -p no:cacheprovider "$@"
