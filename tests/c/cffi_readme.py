"""The README's Python example ("From Python (cffi)"), run as it stands there: a first run
saves a page pattern, a second run in a fresh process restores it and must see the same bytes.

Usage: cffi_readme.py README.md, with ICKPT_TEST_DIR an empty store directory and pkg-config
finding ickpt (run.sh provides both). Needs cffi for this python3 (scripts/deps.sh).
"""

import os
import re
import subprocess
import sys
import zlib

try:
    import cffi  # noqa: F401  (the example imports it in its own process)
except ImportError:
    sys.exit(f"cffi is missing for {sys.executable}: run scripts/deps.sh (python3-cffi)")

with open(sys.argv[1]) as f:
    found = re.search(r"### From Python \(cffi\)\n.*?```python\n(.*?)```", f.read(), re.S)
if not found:
    sys.exit("README.md has no ```python block under '### From Python (cffi)'")
example = found.group(1)
env = dict(os.environ, ICKPT_DIR=os.environ["ICKPT_TEST_DIR"])
crc = zlib.crc32(bytes(range(256)) * 32)

for expected in (f"saved {crc}\n", f"restored {crc}\n"):
    run = subprocess.run([sys.executable, "-c", example], env=env, capture_output=True, text=True)
    if run.returncode != 0 or run.stdout != expected:
        sys.exit(
            f"the example printed {run.stdout!r} (exit status {run.returncode}), "
            f"expected {expected!r}\n{run.stderr}"
        )
print("cffi_readme: saved and restored 8192 bytes through cffi")
