#!/usr/bin/env bash
# scripts/each-backend.sh ICKPT CMD...: run CMD once per tracking backend, with ICKPT_BACKEND
# set to it (and any argument "@" replaced by its name). All three are run; one this kernel
# lacks (per `ICKPT probe --list`) is reported as missing and fails the run, since CI must
# cover every backend: set ICKPT_ALLOW_MISSING_BACKENDS=1 on an older kernel to skip it.
set -uo pipefail
ickpt=$1
shift
available=$("$ickpt" probe --list) || { echo "each-backend: '$ickpt probe --list' failed" >&2; exit 2; }
status=0
for b in mprotect uffd uffd-async; do
    if ! grep -qx "$b" <<<"$available"; then
        echo "== backend $b: NOT AVAILABLE on this kernel (see '$ickpt probe')"
        [ "${ICKPT_ALLOW_MISSING_BACKENDS:-0}" = 1 ] || status=1
        continue
    fi
    echo "== backend $b"
    args=()
    for a in "$@"; do args+=("${a//@/$b}"); done
    ICKPT_BACKEND=$b "${args[@]}" || { echo "== backend $b: FAILED"; status=1; }
done
exit $status
