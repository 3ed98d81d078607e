#!/usr/bin/env bash
# install.sh DEST PREFIX: copy the release build to DEST laid out for PREFIX, with ickpt.pc.
set -euo pipefail
dest=$1; prefix=$2
root=$(cd "$(dirname "$0")/.." && pwd)
rel="$root/target/release"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
install -d "$dest/lib/pkgconfig" "$dest/include" "$dest/bin"
install -m 0755 "$rel/libickpt.so" "$dest/lib/libickpt.so"
install -m 0644 "$rel/libickpt.a" "$dest/lib/libickpt.a"
install -m 0644 "$root/include/ickpt.h" "$dest/include/ickpt.h"
install -m 0755 "$rel/ickpt" "$dest/bin/ickpt"
cat > "$dest/lib/pkgconfig/ickpt.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ickpt
Description: Incremental checkpoint/restart of application memory
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lickpt
Libs.private: -lpthread -ldl -lm -lgcc_s
PC
echo "installed ickpt $version into $dest"
