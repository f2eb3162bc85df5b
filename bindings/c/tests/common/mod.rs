//! Building the C test programs of `tests/c` against this crate's library.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding liboffhost_c.so: beside this test's executable.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe.parent().expect("deps dir").to_path_buf();
    assert!(
        dir.join("liboffhost_c.so").exists(),
        "liboffhost_c.so is not in {}",
        dir.display()
    );
    dir
}

/// Compiles tests/c/NAME.c into `out`, warnings as errors.
pub fn build(name: &str, out: &Path) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let exe = out.join(name);
    let st = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(here.join("include"))
        .arg(here.join(format!("tests/c/{name}.c")))
        .arg("-L")
        .arg(&lib)
        .arg("-loffhost_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc failed on tests/c/{name}.c");
    exe
}
