#!/usr/bin/env bash
# install-mpi.sh DEST PREFIX [MPICC [--test-switches]]: build libickpt_mpi.so with the MPI
# compiler wrapper MPICC (default: mpicc) against the libickpt already installed in DEST
# (scripts/install.sh), and install it with ickpt_mpi.h and ickpt-mpi.pc. One build serves
# the MPI it was built with: ickpt-mpi.pc's description names it. --test-switches builds the
# test build instead, with the kill switch ICKPT_MPI_CRASH (docs/mpi.md, "Test switch"), for
# tests/mpi/run.sh only: never install it for users.
set -euo pipefail
dest=$1; prefix=$2; mpicc=${3:-mpicc}
switches=()
case ${4:-} in
  "") ;;
  --test-switches) switches=(-DICKPT_MPI_TEST_SWITCHES) ;;
  *) echo "install-mpi: unknown option ${4}: only --test-switches" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
if ! command -v "$mpicc" >/dev/null 2>&1; then
  echo "install-mpi: $mpicc not found: install an MPI (make deps installs Open MPI and MPICH)" >&2
  exit 1
fi
# A wrapper that names neither (Intel MPI, an MPI built by hand) is fine: grep finding nothing
# must not end the script under pipefail.
which_mpi=$("$mpicc" -show 2>/dev/null | grep -o -E 'openmpi|mpich' | head -n1 || true)
which_mpi=${which_mpi:-an unknown MPI}
install -d "$dest/lib/pkgconfig" "$dest/include"
install -m 0644 "$root/mpi/ickpt_mpi.h" "$dest/include/ickpt_mpi.h"
# ickpt_mpi_recv.c defines MPI's receive, collective and completion calls, under their MPI_
# and PMPI_ names, so that MPI may write into protected memory (docs/mpi.md): a program picks
# them up when -lickpt_mpi comes before the MPI library on its link line, as mpicc with
# `pkg-config --libs ickpt-mpi` puts it. They find MPI's own with dlsym (-ldl before glibc 2.34).
# Named as libickpt is (scripts/install.sh): libickpt_mpi.so.VERSION, SONAME
# libickpt_mpi.so.MAJOR, with the links libickpt_mpi.so.MAJOR and libickpt_mpi.so.
soname=libickpt_mpi.so.${version%%.*}
"$mpicc" -O2 -g -Wall -Wextra -Werror -fPIC -shared -I"$dest/include" ${switches[@]+"${switches[@]}"} \
  "$root/mpi/ickpt_mpi.c" "$root/mpi/ickpt_mpi_recv.c" -o "$dest/lib/libickpt_mpi.so.$version" \
  -Wl,-soname,"$soname" -L"$dest/lib" -Wl,-rpath,"$prefix/lib" -lickpt -ldl
ln -sfn "libickpt_mpi.so.$version" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/libickpt_mpi.so"
cat > "$dest/lib/pkgconfig/ickpt-mpi.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ickpt-mpi
Description: Coordinated ickpt checkpoints of MPI jobs (built with $which_mpi; compile with its mpicc)
Version: $version
Requires: ickpt
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lickpt_mpi
PC
echo "installed ickpt-mpi $version ($which_mpi, $mpicc${switches[@]+, test build}) into $dest"

# The Fortran modules (`use ickpt`, `use ickpt_mpi`): ickpt.mod and ickpt_mpi.mod in include/,
# their procedures in libickpt_fortran.so and libickpt_mpi_fortran.so. A .mod file is read
# only by the gfortran that wrote it: build programs with the same gfortran (mpif90 is one).
fc=${FC:-gfortran}
if ! command -v "$fc" >/dev/null 2>&1; then
  echo "install-mpi: $fc not found: the Fortran modules are not installed (make deps installs gfortran)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fc" -O2 -g -Wall -Werror -fPIC -J "$work" -c "$root/fortran/ickpt.f90" -o "$work/ickpt.o"
"$fc" -O2 -g -Wall -Werror -fPIC -J "$work" -c "$root/fortran/ickpt_mpi.f90" -o "$work/ickpt_mpi.o"
"$fc" -shared "$work/ickpt.o" -o "$dest/lib/libickpt_fortran.so" \
  -L"$dest/lib" -Wl,-rpath,"$prefix/lib" -lickpt
"$fc" -shared "$work/ickpt_mpi.o" -o "$dest/lib/libickpt_mpi_fortran.so" \
  -L"$dest/lib" -Wl,-rpath,"$prefix/lib" -lickpt_fortran -lickpt_mpi -lickpt
install -m 0644 "$work/ickpt.mod" "$work/ickpt_mpi.mod" "$dest/include/"
cat > "$dest/lib/pkgconfig/ickpt-fortran.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ickpt-fortran
Description: ickpt for Fortran: use ickpt (modules built with $("$fc" -dumpfullversion 2>/dev/null || echo "$fc"))
Version: $version
Requires: ickpt
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lickpt_fortran
PC
cat > "$dest/lib/pkgconfig/ickpt-mpi-fortran.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ickpt-mpi-fortran
Description: ickpt for Fortran MPI jobs: use ickpt_mpi (built with $which_mpi; compile with its mpif90)
Version: $version
Requires: ickpt-mpi ickpt-fortran
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lickpt_mpi_fortran
PC
echo "installed the Fortran modules ickpt and ickpt_mpi ($fc) into $dest"
