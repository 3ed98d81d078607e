#!/usr/bin/env bash
# install.sh DEST PREFIX: copy the release build to DEST laid out for PREFIX, with ickpt.pc
# (libickpt.so) and ickpt-static.pc (libickpt.a). The shared library is libickpt.so.VERSION,
# whose SONAME (crates/core/build.rs) is libickpt.so.MAJOR, with the links libickpt.so.MAJOR
# (what programs load) and libickpt.so (what -lickpt finds).
set -euo pipefail
dest=$1; prefix=$2
root=$(cd "$(dirname "$0")/.." && pwd)
# The build cargo made: in CARGO_TARGET_DIR when set (tests/install_home.sh sets it).
rel="${CARGO_TARGET_DIR:-$root/target}/release"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
soname=libickpt.so.${version%%.*}
built=$(readelf -d "$rel/libickpt.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$built" != "$soname" ]; then
  echo "install: $rel/libickpt.so has the SONAME '$built', not $soname: rebuild it (make build)" >&2
  exit 1
fi
install -d "$dest/lib/pkgconfig" "$dest/include" "$dest/bin"
install -m 0755 "$rel/libickpt.so" "$dest/lib/libickpt.so.$version"
ln -sfn "libickpt.so.$version" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/libickpt.so"
install -m 0644 "$rel/libickpt.a" "$dest/lib/libickpt.a"
install -m 0644 "$root/include/ickpt.h" "$root/include/ickpt_coord.h" "$dest/include/"
install -m 0755 "$rel/ickpt" "$dest/bin/ickpt"
# What `ickpt run` preloads into a program; `ickpt` finds it in ../lib/ickpt/.
install -d "$dest/lib/ickpt"
install -m 0755 "$rel/libickpt_run.so" "$dest/lib/ickpt/libickpt_run.so"
# What libickpt.a needs besides libc (`rustc --print native-static-libs`: -lgcc_s -lutil -lrt
# -lpthread -lm -ldl -lc).
native="-lutil -lrt -lpthread -lm -ldl"
# ickpt.pc links libickpt.so. Its --static flags serve fully static programs (cc -static),
# where no libgcc_s exists: the compiler driver brings libgcc_eh instead.
cat > "$dest/lib/pkgconfig/ickpt.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ickpt
Description: Incremental checkpoint/restart of application memory
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lickpt
Libs.private: $native
PC
# ickpt-static.pc links libickpt.a into a dynamically linked program. It names the archive
# by path: given -lickpt, the linker takes libickpt.so whenever it lies next to the archive,
# whatever pkg-config --static adds.
cat > "$dest/lib/pkgconfig/ickpt-static.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ickpt-static
Description: Incremental checkpoint/restart of application memory (static library)
Version: $version
Cflags: -I\${includedir}
Libs: \${libdir}/libickpt.a -lgcc_s $native
PC
echo "installed ickpt $version into $dest"
