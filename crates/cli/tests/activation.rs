//! Socket activation, as systemd does it: `systemd-socket-activate` (the systemd package's
//! tool that passes sockets the way a `.socket` unit does) listens, and on the first
//! connection starts `offhost engine --listen tls:systemd` with the listening socket as
//! descriptor 3. The engine must serve that connection (a pipeline submitted over mutual TLS
//! gives what `offhost run` gives), and without a passed socket it must refuse to start,
//! saying why.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Reaped;

const BIN: &str = env!("CARGO_BIN_EXE_offhost");
const ACTIVATE: &str = "systemd-socket-activate";

fn run(args: &[&str], dir: &Path) -> Output {
    let mut child = Reaped(
        Command::new(BIN)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run offhost"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait for offhost") {
            let mut out = (Vec::new(), Vec::new());
            child
                .stdout
                .take()
                .unwrap()
                .read_to_end(&mut out.0)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_end(&mut out.1)
                .unwrap();
            return Output {
                status,
                stdout: out.0,
                stderr: out.1,
            };
        }
        assert!(Instant::now() < deadline, "offhost {args:?} hung");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn an_engine_started_on_its_first_connection_serves_it_over_the_passed_socket() {
    if Command::new(ACTIVATE).arg("--help").output().is_err() {
        eprintln!("skipped: no {ACTIVATE} (Debian package systemd)");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let o = run(&["certs", "pki"], dir);
    assert!(o.status.success(), "{}", text(&o.stderr));
    std::fs::create_dir(dir.join("files")).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let pki = dir.join("pki");
    let files = dir.join("files");
    let mut activator = Reaped(
        Command::new(ACTIVATE)
            .args(["-l", &addr, BIN, "engine", "--name", "act", "--listen"])
            .args(["tls:systemd", "--tls-certificates"])
            .arg(&pki)
            .arg("--files")
            .arg(&files)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start systemd-socket-activate"),
    );
    // It listens before anything runs; the engine starts only on the first connection.
    let mut log = BufReader::new(activator.stderr.take().unwrap());
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    assert!(line.contains("Listening on"), "{line:?}");
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = log.read_to_string(&mut all);
        all
    });
    let file = dir.join("act.ion");
    std::fs::write(
        &file,
        "random bytes=300k seed=9 @act >x:p(4,64k)\nhost-out name=res @act <x\n",
    )
    .unwrap();
    let o = run(&["run", "act.ion", "--out", "res=whole.bin"], dir);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let url = format!("act=tls:{addr}");
    let o = run(
        &[
            "submit",
            "--engine",
            &url,
            "--tls-certificates",
            "pki",
            "act.ion",
            "--out",
            "res=served.bin",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let whole = std::fs::read(dir.join("whole.bin")).unwrap();
    assert_eq!(whole.len(), 300 << 10);
    assert_eq!(std::fs::read(dir.join("served.bin")).unwrap(), whole);
    // The engine runs in the activator's place and names the address it was given.
    assert!(activator.try_wait().unwrap().is_none(), "the engine ended");
    drop(activator);
    let all = lines.join().unwrap();
    assert!(
        all.contains(&format!("engine: listening on tls:{addr}")),
        "{all}"
    );
}

#[test]
fn an_engine_told_to_take_a_socket_from_systemd_without_one_says_so() {
    let work = tempfile::tempdir().unwrap();
    let o = run(&["certs", "pki"], work.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(
        &[
            "engine",
            "--listen",
            "tls:systemd",
            "--tls-certificates",
            "pki",
        ],
        work.path(),
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("tls:systemd") && err.contains("LISTEN_FDS"),
        "{err}"
    );
    // A client cannot connect to `systemd`.
    std::fs::write(
        work.path().join("none.ion"),
        "random bytes=1k @x >y\nnull @x <y\n",
    )
    .unwrap();
    let o = run(
        &[
            "submit",
            "--engine",
            "x=tls:systemd",
            "--tls-certificates",
            "pki",
            "none.ion",
        ],
        work.path(),
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("connect to HOST:PORT"),
        "{}",
        text(&o.stderr)
    );
}
