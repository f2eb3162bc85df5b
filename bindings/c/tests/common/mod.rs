//! Building C programs against this crate's library, for the tests that run them.
#![allow(dead_code)] // each test binary uses a different part

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

/// Compiles the C file `src` into `out/name`, warnings as errors, against include/offhost.h
/// and this build's library (found at run time through the rpath).
pub fn compile(src: &Path, name: &str, out: &Path) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let exe = out.join(name);
    let st = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(here.join("include"))
        .arg(src)
        .arg("-L")
        .arg(&lib)
        .arg("-loffhost_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc failed on {}", src.display());
    exe
}

/// Compiles tests/c/NAME.c into `out`.
pub fn build(name: &str, out: &Path) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    compile(&here.join(format!("tests/c/{name}.c")), name, out)
}
