//! include/ickpt.h must be exactly what cbindgen generates from the Rust side.

#[test]
fn checked_in_header_matches_the_rust_side() {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let cfg = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).unwrap();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(cfg)
        .generate()
        .expect("cbindgen")
        .write(&mut out);
    let generated = String::from_utf8(out).unwrap();
    let path = format!("{crate_dir}/../../include/ickpt.h");
    if std::env::var_os("ICKPT_BLESS_HEADER").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/ickpt.h differs from the Rust C API; run 'make header' and commit it"
    );
}
