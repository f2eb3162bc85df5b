//! The access rules, tried as a hostile client would, against the real binary: TLS refusals
//! (no client certificate, one from another CA, plain TCP against TLS), plain TCP only with
//! --insecure, pipelines from outside that try to read or write files they should not, and
//! another uid on a Unix socket.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::Reaped;

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run offhost")
}

fn certs(dir: &Path) -> PathBuf {
    let p = dir.join("pki");
    let o = run(&["certs", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    p
}

/// `offhost engine ARGS` (one `--listen`); returns the child and the URL it listens on.
fn engine(args: &[&str]) -> (Reaped, String) {
    let (child, mut urls) = common::engine_in(&[], args);
    (child, urls.remove(0))
}

fn submit(url: &str, extra: &[&str], file: &Path) -> Output {
    let mut args = vec!["submit", "--engine", url];
    args.extend_from_slice(extra);
    args.push(file.to_str().unwrap());
    run(&args)
}

fn refused(o: &Output, wants: &[&str]) {
    let e = text(&o.stderr);
    assert!(!o.status.success(), "accepted; stdout {}", text(&o.stdout));
    for w in wants {
        assert!(e.contains(w), "{w:?} not in: {e}");
    }
}

#[test]
fn tls_engine_refuses_clients_without_the_right_certificate() {
    let d = tempfile::tempdir().unwrap();
    let pki = certs(d.path());
    let pki_s = pki.to_str().unwrap();
    let (_e, url) = engine(&["--listen", "tls:127.0.0.1:0", "--tls-certificates", pki_s]);
    assert!(url.starts_with("tls:127.0.0.1:"), "{url}");
    let ion = d.path().join("t.ion");
    std::fs::write(&ion, "tone seconds=0.2 >a\ncount <a\n").unwrap();

    // The right certificates: served.
    let o = submit(&url, &["--tls-certificates", pki_s], &ion);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("finished"), "{}", text(&o.stdout));

    // No certificate directory at all.
    refused(&submit(&url, &[], &ion), &["needs a certificate directory"]);

    // Trusting the CA but presenting no certificate.
    let anon = d.path().join("anon");
    std::fs::create_dir(&anon).unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), anon.join("ca-cert.pem")).unwrap();
    refused(
        &submit(&url, &["--tls-certificates", anon.to_str().unwrap()], &ion),
        &["not admitted", "CertificateRequired"],
    );

    // A certificate from another CA.
    let other = certs(&d.path().join("other"));
    let mixed = d.path().join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), mixed.join("ca-cert.pem")).unwrap();
    for f in ["client-cert.pem", "client-key.pem"] {
        std::fs::copy(other.join(f), mixed.join(f)).unwrap();
    }
    refused(
        &submit(&url, &["--tls-certificates", mixed.to_str().unwrap()], &ion),
        &["not admitted"],
    );
    // A client that trusts another CA refuses the server.
    refused(
        &submit(&url, &["--tls-certificates", other.to_str().unwrap()], &ion),
        &["certificate"],
    );

    // Plain TCP against the TLS port.
    let tcp = url.replacen("tls:", "tcp:", 1);
    refused(&submit(&tcp, &[], &ion), &[]);

    // And after all that, the engine still serves.
    let o = submit(&url, &["--tls-certificates", pki_s], &ion);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn plain_tcp_listeners_need_insecure_and_say_so() {
    let d = tempfile::tempdir().unwrap();
    let pki = certs(d.path());
    for args in [
        &["engine", "--listen", "tcp:127.0.0.1:0"][..],
        &["echo", "--listen", "tcp:127.0.0.1:0"][..],
        &["nbd", "--listen", "tcp:127.0.0.1:0", "--export", "d=mem:1M"][..],
        &[
            "nbd",
            "--listen",
            "tcp:127.0.0.1:0",
            "--export",
            "d=mem:1M",
            // TLS offered but not required still serves plain clients.
            "--tls=on",
            "--tls-certificates",
            pki.to_str().unwrap(),
        ][..],
    ] {
        let o = run(args);
        assert!(!o.status.success(), "{args:?} started");
        let e = text(&o.stderr);
        assert!(e.contains("--insecure"), "{args:?}: {e}");
    }
    for cmd in ["engine", "echo", "nbd"] {
        let h = text(&run(&[cmd, "--help"]).stdout);
        assert!(h.contains("--insecure"), "{cmd} --help: {h}");
        assert!(h.contains("--tls-certificates"), "{cmd} --help: {h}");
    }
}

/// Each hostile pipeline, against an engine with --files DIR: refused at submit with the
/// task, its line and the path; nothing outside DIR is read, written or created.
#[test]
fn pipelines_from_outside_cannot_leave_their_directory() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("files");
    std::fs::create_dir(&root).unwrap();
    let secret = d.path().join("shadow");
    std::fs::write(&secret, "root:$6$secret:19000:0:99999:7:::\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(root.join("ok.bin"), vec![1u8; 1000]).unwrap();
    std::os::unix::fs::symlink(&secret, root.join("link")).unwrap();
    std::os::unix::fs::symlink(d.path(), root.join("up")).unwrap();
    let sock = d.path().join("e.sock");
    let listen = format!("unix:{}", sock.display());
    let (_e, url) = engine(&["--listen", &listen, "--files", root.to_str().unwrap()]);
    let secret_s = secret.display().to_string();
    let planted = d.path().join("planted");
    let planted_s = planted.display().to_string();
    let cases: Vec<(String, &str, String)> = vec![
        // (pipeline, task, path): the hostile line is line 2 each time.
        (
            format!("tone seconds=0.1 >t\nfile path={secret_s} >a\nhost-out name=x <a\nnull <t\n"),
            "file",
            secret_s.clone(),
        ),
        (
            "tone seconds=0.1 >t\nfile path=../shadow >a\nhost-out name=x <a\nnull <t\n".into(),
            "file",
            "../shadow".into(),
        ),
        (
            "tone seconds=0.1 >t\nfile path=link >a\nhost-out name=x <a\nnull <t\n".into(),
            "file",
            "link".into(),
        ),
        (
            "tone seconds=0.1 >t\nfile path=up/shadow >a\nhost-out name=x <a\nnull <t\n".into(),
            "file",
            "up/shadow".into(),
        ),
        (
            format!("fill bytes=10 >a\nfile path={planted_s} <a\n"),
            "file",
            planted_s.clone(),
        ),
        (
            "fill bytes=10 >a\nfile path=../planted <a\n".into(),
            "file",
            "../planted".into(),
        ),
        (
            "fill bytes=10 >a\nfile path=up/planted <a\n".into(),
            "file",
            "up/planted".into(),
        ),
        (
            "tone seconds=0.1 >t\nwav path=../x.wav >a\nnull <a\nnull <t\n".into(),
            "wav",
            "../x.wav".into(),
        ),
        (
            "tone seconds=0.1 >t\npet-read path=/etc/passwd >a\nnull <a\nnull <t\n".into(),
            "pet-read",
            "/etc/passwd".into(),
        ),
        (
            "tone seconds=0.1 >t\npetlink-read path=../x.l >a\nnull <a\nnull <t\n".into(),
            "petlink-read",
            "../x.l".into(),
        ),
    ];
    for (i, (pipeline, task, path)) in cases.iter().enumerate() {
        let ion = d.path().join(format!("h{i}.ion"));
        std::fs::write(&ion, pipeline).unwrap();
        refused(
            &submit(&url, &[], &ion),
            &[
                "line 2",
                &format!("task '{task}'"),
                &format!("{path:?}"),
                "file access refused",
            ],
        );
    }
    // recon's png= goes through the same access.
    let ion = d.path().join("recon.ion");
    std::fs::write(&ion, "pet-sim events=1000 >e\nrecon png=../out.png <e\n").unwrap();
    refused(
        &submit(&url, &[], &ion),
        &["task 'recon'", "\"../out.png\"", "file access refused"],
    );
    assert!(
        !planted.exists(),
        "a file was planted outside the directory"
    );
    assert!(!d.path().join("out.png").exists());
    // Inside the directory, files work.
    let ion = d.path().join("copy.ion");
    std::fs::write(&ion, "file path=ok.bin >a\nfile path=copy.bin <a\n").unwrap();
    let o = submit(&url, &[], &ion);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read(root.join("copy.bin")).unwrap(),
        vec![1u8; 1000]
    );
}

#[test]
fn without_files_a_submitted_pipeline_opens_nothing_but_run_still_does() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("in.bin"), b"data").unwrap();
    let listen = format!("unix:{}", d.path().join("e.sock").display());
    let (_e, url) = engine(&["--listen", &listen]);
    let ion = d.path().join("p.ion");
    let inside = d.path().join("in.bin").display().to_string();
    std::fs::write(&ion, format!("file path={inside} >a\ncount <a\n")).unwrap();
    refused(
        &submit(&url, &[], &ion),
        &[
            "line 1",
            "task 'file'",
            &format!("{inside:?}"),
            "--files DIR",
        ],
    );
    // The user's own process keeps full access.
    let o = Command::new(BIN)
        .current_dir(d.path())
        .args(["run", ion.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn socket_files_are_owner_only() {
    let d = tempfile::tempdir().unwrap();
    let e_sock = d.path().join("e.sock");
    let (_e, _) = engine(&["--listen", &format!("unix:{}", e_sock.display())]);
    let n_sock = d.path().join("n.sock");
    let mut nbd = Reaped(
        Command::new(BIN)
            .args(["nbd", "--listen", &format!("unix:{}", n_sock.display())])
            .args(["--export", "d=mem:1M"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(nbd.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    for s in [&e_sock, &n_sock] {
        let mode = std::fs::metadata(s).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", s.display());
    }
}

/// As root (CI): a client running as `nobody` is turned away by the engine's uid check even
/// when the socket file lets it connect, and admitted with --allow-uid.
#[test]
fn another_uid_on_a_unix_socket_is_refused() {
    if offhost_access::peer::own_uid() != 0 {
        eprintln!("skipped: needs root to run a client as another uid");
        return;
    }
    let have_setpriv = Command::new("setpriv").arg("--help").output().is_ok();
    assert!(have_setpriv, "setpriv (util-linux) is required");
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |url: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(["submit", "--engine", url, "--list"])
            .current_dir("/")
            .output()
            .unwrap()
    };
    for (allow, admitted) in [(None, false), (Some("65534"), true)] {
        let sock = d.path().join(format!("e{admitted}.sock"));
        let listen = format!("unix:{}", sock.display());
        let mut args = vec!["--listen", listen.as_str()];
        if let Some(uid) = allow {
            args.extend(["--allow-uid", uid]);
        }
        let (_e, url) = engine(&args);
        // Past the file mode: what is left is the uid check.
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
        let o = as_nobody(&url);
        assert_eq!(
            o.status.success(),
            admitted,
            "allow {allow:?}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
}

#[test]
fn certs_for_engines_name_them_and_refuse_names_that_cannot_be_certified() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("pki");
    let o = run(&[
        "certs",
        p.to_str().unwrap(),
        "--engine",
        "alpha",
        "--engine",
        "beta",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("engine alpha: --name alpha --tls-certificates"));
    for e in ["alpha", "beta"] {
        let f = p.join("engines").join(e).join("client-cert.pem");
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{}", f.display());
    }
    let o = run(&[
        "certs",
        d.path().join("other").to_str().unwrap(),
        "--engine",
        "a b",
    ]);
    refused(&o, &["engine name \"a b\""]);
    assert!(
        !d.path().join("other/ca-cert.pem").exists(),
        "nothing written"
    );
}
