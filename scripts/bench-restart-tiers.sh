#!/usr/bin/env bash
# bench-restart-tiers.sh ICKPT OUT: the parts of make bench-tiers that need an object store.
# Starts Garage (built by make deps into ~/.cache/ickpt, or $ICKPT_GARAGE) on 127.0.0.1 in
# single-node mode with a bucket, as the tests do (crates/core/tests/common/garage.rs), runs
# `ICKPT bench restart-tiers --object s3://...` and `ICKPT bench drain --object s3://...`, and
# stops it; writes OUT/restart-tiers.json and OUT/drain.json.
set -euo pipefail
ickpt=$1; out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
garage=${ICKPT_GARAGE:-$HOME/.cache/ickpt/garage-$(cat "$root/scripts/garage.version")/bin/garage}
[ -x "$garage" ] || { echo "bench-restart-tiers: no garage at $garage: run make deps" >&2; exit 1; }
work=$root/build/bench-garage
rm -rf "$work"; mkdir -p "$work"
# Two distinct free ports, both bound at once while chosen.
read -r rpc s3 < <(python3 -c 'import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
key=GK0123456789abcdef01234567
secret=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
cat >"$work/garage.toml" <<TOML
metadata_dir = "$work/meta"
data_dir = "$work/data"
db_engine = "lmdb"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$rpc"
rpc_public_addr = "127.0.0.1:$rpc"
rpc_secret = "$secret"
[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$s3"
root_domain = ".s3.garage"
TOML
GARAGE_DEFAULT_ACCESS_KEY=$key GARAGE_DEFAULT_SECRET_KEY=$secret GARAGE_DEFAULT_BUCKET=bench \
  RUST_LOG=warn "$garage" -c "$work/garage.toml" server --single-node --default-bucket \
  >"$work/garage.log" 2>&1 &
pid=$!
# Garage stopped (SIGKILL after 10 s), its log shown when something failed, its data removed.
stop() {
  local rc=$?
  kill $pid 2>/dev/null
  timeout 10 tail --pid=$pid -f /dev/null || kill -9 $pid 2>/dev/null
  [ $rc = 0 ] || cat "$work/garage.log" >&2
  rm -rf "$work"
}
trap stop EXIT
# Answering on the S3 port, at most 60 s.
ready=0
for _ in $(seq 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$s3") 2>/dev/null && { ready=1; break; }
  kill -0 $pid 2>/dev/null || { echo "bench-restart-tiers: garage exited" >&2; exit 1; }
  sleep 0.1
done
[ $ready = 1 ] || { echo "bench-restart-tiers: garage did not answer within 60 s" >&2; exit 1; }
export AWS_ENDPOINT_URL=http://127.0.0.1:$s3 AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=$key \
  AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=garage
"$ickpt" bench restart-tiers --dir "$root/build/bench" --object s3://bench/restart --out "$out"
"$ickpt" bench drain --dir "$root/build/bench" --object s3://bench/drain --out "$out"
