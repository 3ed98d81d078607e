//! libickpt.so's SONAME: `libickpt.so.MAJOR`, MAJOR the package's major version, the name a
//! program linked against the library records and the dynamic loader looks for. The ABI only
//! grows (docs/abi.md), so MAJOR changes only with a break; scripts/install.sh installs the
//! library as `libickpt.so.VERSION` with the links `libickpt.so.MAJOR` and `libickpt.so`.
//! (cargo-c would set the same; it is not used: docs/abi.md, "Linking", says why.)

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets it");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libickpt.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
