"""An unmodified CPython program for `ickpt run` tests: a heat stencil on a NumPy array (the
interpreter's heap, NumPy's buffers and whatever threads its BLAS starts), then a pure-Python
loop over ints, a dict and a list that grow, each step. Each step appends a line to the file
named by argv[1], written by Python's buffered text file (its buffer is program memory,
restored with it); stdout gets the final checksum once."""

import hashlib
import sys

import numpy as np


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: numpy_heat.py OUT STEPS")
    steps = int(sys.argv[2])
    # Imported: the test may wait for this before it checkpoints (see its comment).
    print("ready", file=sys.stderr, flush=True)
    rng = np.random.default_rng(12345)
    u = rng.random(1 << 16)
    m = rng.random((64, 64))
    counts = {}
    history = []
    total = hashlib.sha256()
    with open(sys.argv[1], "w") as out:
        for s in range(steps):
            u[1:-1] += 0.25 * (u[:-2] - 2.0 * u[1:-1] + u[2:])
            m = np.tanh(m @ m.T / 64.0 + u[:64])
            h = hashlib.sha256(u.tobytes() + m.tobytes()).hexdigest()[:16]
            acc = 0
            for i in range(4000):
                acc = (acc * 31 + (i ^ s)) % 1000003
            counts[acc % 101] = counts.get(acc % 101, 0) + 1
            history.append((s, acc))
            total.update(h.encode())
            out.write(f"step {s} {h} {acc} {len(counts)}\n")
    print(f"final {total.hexdigest()[:16]} after {steps} steps, {len(history)} kept")


main()
