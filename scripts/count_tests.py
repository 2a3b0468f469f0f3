"""Check a pytest JUnit XML report: at least MIN tests ran (passed or failed, not
skipped). Used by scripts/test.sh, so that a broken build whose tests mostly skip
cannot pass.

Usage: python3 scripts/count_tests.py REPORT.xml MIN
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def executed(report: str) -> tuple[int, int]:
    """How many test cases ran and how many were skipped, in ``report``."""
    root = ET.parse(report).getroot()
    ran = skipped = 0
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            skipped += 1
        else:
            ran += 1
    return ran, skipped


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not argv[2].isdigit():
        print("usage: count_tests.py REPORT.xml MIN", file=sys.stderr)
        return 2
    ran, skipped = executed(argv[1])
    least = int(argv[2])
    if ran < least:
        print(
            f"error: only {ran} tests ran ({skipped} skipped); a whole run executes at "
            f"least {least}: is the build or an extra missing?",
            file=sys.stderr,
        )
        return 1
    print(f"{ran} tests ran, {skipped} skipped (at least {least} required)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
