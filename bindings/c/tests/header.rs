//! include/offhost.h is what cbindgen makes of the crate now.

#[test]
fn the_header_is_what_cbindgen_makes() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut made);
    let path = format!("{dir}/include/offhost.h");
    if std::env::var_os("OFFHOST_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write the header");
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == made,
        "{path} is stale: regenerate it with OFFHOST_BLESS=1 cargo test -p offhost-c --test header"
    );
}
