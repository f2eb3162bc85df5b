//! The C entry points given hostile values: `tests/c/hostile.c`, built with `cc` against
//! include/offhost.h and this crate's shared library, run against a Rust echo server. Every
//! call must return an error status with a message; none may crash or report a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

use offhost_link::Server;

/// The directory holding liboffhost_c.so: beside this test's executable.
fn lib_dir() -> PathBuf {
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
fn build(name: &str, out: &Path) -> PathBuf {
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

#[test]
fn every_c_entry_point_refuses_hostile_values_with_an_error_status() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build("hostile", dir.path());
    let echo = Server::bind(&format!("unix:{}", dir.path().join("echo.sock").display())).unwrap();
    let url = echo.url().to_owned();
    std::thread::spawn(move || offhost_link::serve_echo(&echo));
    let out = Command::new(&exe)
        .arg(&url)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("hostile: all passed"),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
