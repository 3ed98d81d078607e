#!/usr/bin/env bash
# Install what building and testing ickpt needs, only when it is missing (Debian).
set -euo pipefail
# `deps.sh plot`: only what the benchmark plots need (matplotlib, from Debian, for Debian's
# python3: a python3 earlier in PATH, such as pyenv's, does not see it).
if [ "${1:-}" = plot ]; then
  if ! /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then
    echo "deps: installing python3-matplotlib with apt-get"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-matplotlib
  fi
  exit 0
fi
# `deps.sh s3`: the S3-compatible server the object-store tier's tests start (Garage, from
# crates.io), built once into ~/.cache/ickpt (13 minutes on the project's 2-core VM, beside
# other builds) and reused by every clone. ICKPT_GARAGE names another binary; the tests and
# scripts/bench-restart-tiers.sh look for the same path. The version is scripts/garage.version's.
if [ "${1:-}" = s3 ]; then
  garage_version=$(cat "$(dirname "$0")/garage.version")
  garage_root=$HOME/.cache/ickpt/garage-$garage_version
  if [ -z "${ICKPT_GARAGE:-}" ] && [ ! -x "$garage_root/bin/garage" ]; then
    echo "deps: building garage $garage_version (S3 server for the tests) into $garage_root, once"
    cargo install garage --version "$garage_version" --locked --no-default-features \
      --features lmdb,bundled-libs --root "$garage_root"
  fi
  exit 0
fi
need=()
for tool in cc:gcc c++:g++ make:make pkg-config:pkg-config; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]} with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
# The C tests load libickpt.so from Python with cffi (tests/c/cffi_readme.py), run by Debian's
# python3 for the same reason as the plots.
if ! /usr/bin/python3 -c 'import cffi' >/dev/null 2>&1; then
  echo "deps: installing python3-cffi with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-cffi
fi
# The `ickpt run` tests restart a CPython program that uses NumPy (crates/cli/tests/
# run_languages.rs), run by Debian's python3 with Debian's NumPy.
if ! /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
  echo "deps: installing python3-numpy with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-numpy
fi
# MPI jobs: Open MPI and MPICH, both tested (mpicc.openmpi, mpicc.mpich), and
# gfortran for the Fortran modules and examples.
mpi=()
command -v mpicc.openmpi >/dev/null 2>&1 || mpi+=(libopenmpi-dev openmpi-bin)
command -v mpicc.mpich >/dev/null 2>&1 || mpi+=(libmpich-dev mpich)
command -v gfortran >/dev/null 2>&1 || mpi+=(gfortran)
if [ ${#mpi[@]} -gt 0 ]; then
  echo "deps: installing ${mpi[*]} with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${mpi[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "deps: cargo is in $HOME/.cargo/bin; add it to PATH" >&2
  else
    echo "deps: installing Rust (cargo) from Debian"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq cargo rustc
  fi
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy
  fi
fi
