#!/usr/bin/env bash
# criu.sh: build CRIU 4.1.1 once into ~/.cache/ickpt/criu-4.1.1 (make bench-transparent's
# comparison) and print the path of its `criu` binary. Run as root (apt-get, and CRIU itself).
#
# Debian 12's criu 3.17 fails on the project's kernels (`criu check`: "vdso: Failed to fill
# self vdso symtable"); 4.1.1 works. Its upstream tarball is in Debian trixie's source pool:
# this takes it with `apt-get source --download-only`, through a trixie deb-src entry made from
# the machine's own Debian mirror and kept in a private apt state (the system's sources and
# lists are not touched), which checks the tarball against trixie's signed Sources index. The
# .dsc and the Debian packaging are not in that pool, which does not matter: the upstream
# tarball is built as it is, against bookworm's libraries (about 25 s on 2 cores).
# ICKPT_CRIU names another criu binary instead, and skips all of this.
set -euo pipefail
version=4.1.1
root=${ICKPT_CRIU_ROOT:-$HOME/.cache/ickpt/criu-$version}
bin=$root/bin/criu
if [ -n "${ICKPT_CRIU:-}" ]; then
  echo "$ICKPT_CRIU"
  exit 0
fi
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
deps=(build-essential pkg-config libprotobuf-dev libprotobuf-c-dev protobuf-c-compiler libcap-dev libnl-3-dev
      libnet1-dev libbsd-dev libgnutls28-dev libnftables-dev python3-protobuf xz-utils)
need=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "criu.sh: installing ${need[*]} with apt-get" >&2
  $SUDO timeout 600 apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO timeout 1200 apt-get install -y -qq "${need[@]}" >&2
fi

# The mirror the machine's own Debian sources use (deb822 or one-line format).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
  awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}')
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:.*\/debian\/?$/) {print $i; exit}}')
fi
[ -n "$mirror" ] || { echo "criu.sh: no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ickpt-criu.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parts" "$work/lists/partial" "$work/dl"
cat >"$work/parts/trixie-src.sources" <<EOF
Types: deb-src
URIs: $mirror
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts"
          -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
echo "criu.sh: fetching criu_$version.orig.tar.xz from trixie's source pool at $mirror" >&2
timeout 600 apt-get "${apt_opts[@]}" -qq update >&2
# The .dsc and .debian.tar.xz are missing from the pool (404), so apt-get exits non-zero; the
# orig tarball it fetched and checked is what is used.
(cd "$work/dl" && timeout 600 apt-get "${apt_opts[@]}" source --download-only "criu=$version-1" >&2) || true
tarball=$work/dl/criu_$version.orig.tar.xz
[ -s "$tarball" ] || { echo "criu.sh: apt-get source left no criu_$version.orig.tar.xz" >&2; exit 1; }

echo "criu.sh: building CRIU $version into $root" >&2
rm -rf "$root.tmp"
mkdir -p "$root.tmp/src" "$root.tmp/bin"
tar -xJf "$tarball" -C "$root.tmp/src" --strip-components=1
timeout 1200 make -C "$root.tmp/src" -j"$(nproc)" criu >"$root.tmp/build.log" 2>&1 || {
  tail -n 30 "$root.tmp/build.log" >&2
  echo "criu.sh: the build failed; the log is $root.tmp/build.log" >&2
  exit 1
}
cp "$root.tmp/src/criu/criu" "$root.tmp/bin/criu"
rm -rf "$root"
mv "$root.tmp" "$root"
"$bin" --version >&2
echo "$bin"
