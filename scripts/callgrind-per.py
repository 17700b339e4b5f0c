#!/usr/bin/env python3
"""The instructions of a callgrind run's `dump load` (the dump the bench-*-instructions scripts
take after their measured work), divided by COUNT: prints "<M> M instructions per WHAT (file)".
Usage: scripts/callgrind-per.py OUT COUNT WHAT"""
import glob
import re
import sys

out, count, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for f in glob.glob(f"{out}/callgrind.*"):
    text = open(f).read()
    if "Trigger: dump load\n" in text:
        total = int(re.search(r"^totals: (\d+)", text, re.M).group(1))
        print(f"{total / count / 1e6:.3f} M instructions per {what} ({f})")
        break
else:
    raise SystemExit("no dump of the load")
