#!/usr/bin/env bash
# check-commits.sh [BASE]: the subject of every commit after BASE is an imperative line of at
# most 72 characters with no final period (CONTRIBUTING.md, "Commits"). BASE defaults to the
# last commit before the rule; history before it is exempt. A clone without BASE (a shallow
# checkout) has nothing to check, and says so.
set -uo pipefail
base=${1:-5659f9d10db31c33aa1a771db59f5e3784f18078}
cd "$(dirname "$0")/.."
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null 2>&1; then
    echo "check-commits: $base is not in this clone (shallow?): no subject checked"
    exit 0
fi
bad=0
while IFS=$'\t' read -r hash subject; do
    n=$(printf '%s' "$subject" | wc -m)
    if [ "$n" -gt 72 ]; then
        echo "check-commits: $hash: the subject has $n characters, at most 72: $subject"
        bad=1
    fi
    case $subject in
        *.) echo "check-commits: $hash: the subject ends with a period: $subject"; bad=1 ;;
    esac
done < <(git log --no-merges --format='%h%x09%s' "$base..HEAD")
exit $bad
