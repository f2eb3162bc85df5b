//! End-to-end tests of `offhost run` and `offhost tasks` with the real binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::Reaped;

fn offhost() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offhost"))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    offhost()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run offhost")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// Runs python3 with `code`; fails with a clear message when python3 or audioop is missing.
fn python(dir: &Path, code: &str) {
    let o = Command::new("python3")
        .current_dir(dir)
        .args(["-W", "ignore", "-c", code])
        .output()
        .expect("python3 is needed for the G.711 reference check (python 3.11+ with audioop)");
    assert!(
        o.status.success(),
        "python reference check failed:\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

#[test]
fn audio_example_runs_and_writes_speaker_and_host_streams() {
    let dir = tempfile::tempdir().unwrap();
    let ion = repo_root().join("examples/audio.ion");
    let o = run_in(
        dir.path(),
        &[
            "run",
            ion.to_str().unwrap(),
            "--out",
            "host=phone.ul",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["finished"], true);
    let wav = hound::WavReader::open(dir.path().join("loudspeaker.wav")).unwrap();
    assert_eq!(wav.spec().sample_rate, 44100);
    assert_eq!(wav.spec().channels, 1);
    assert_eq!(wav.duration(), 441_000, "10 s of mono audio");
    let ul = std::fs::metadata(dir.path().join("phone.ul"))
        .unwrap()
        .len();
    // 10 s at 8 kHz, plus the filter's tail pushed out at end of stream.
    assert!((80_000..80_100).contains(&ul), "{ul} bytes of mu-law");
    // Every buffer came back to its free list.
    for p in stats["pools"].as_array().unwrap() {
        assert_eq!(p["free"], p["count"], "{p}");
    }
}

#[test]
fn mulaw_and_alaw_match_the_python_g711_reference() {
    let dir = tempfile::tempdir().unwrap();
    // The audio chain's 8 kHz samples, and random samples over the whole 16-bit range.
    let ion = write(
        dir.path(),
        "g711.ion",
        "tone seconds=2 freq=300 freq2=1250 amp=0.99 >a\n\
         mix <a >b\n\
         rate from=44100 to=8000 <b >c\n\
         dup <c >lin >tou >toa\n\
         file path=lin.raw <lin\n\
         mulaw <tou >u\n\
         host-out name=host <u\n\
         alaw <toa >al\n\
         file path=a.raw <al\n\
         random bytes=1M seed=7 >r\n\
         dup <r >rl >ru\n\
         file path=rnd.raw <rl\n\
         mulaw <ru >rul\n\
         file path=rnd.ul <rul\n",
    );
    let o = run_in(
        dir.path(),
        &["run", ion.to_str().unwrap(), "--out", "host=u.raw"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::metadata(dir.path().join("u.raw")).unwrap().len() > 15_000);
    python(
        dir.path(),
        "import audioop\n\
         lin = open('lin.raw','rb').read()\n\
         assert audioop.lin2ulaw(lin, 2) == open('u.raw','rb').read(), 'mu-law differs'\n\
         assert audioop.lin2alaw(lin, 2) == open('a.raw','rb').read(), 'A-law differs'\n\
         rnd = open('rnd.raw','rb').read()\n\
         assert len(rnd) == 1 << 20\n\
         assert audioop.lin2ulaw(rnd, 2) == open('rnd.ul','rb').read(), 'mu-law differs on random samples'\n",
    );
}

#[test]
fn malformed_pipeline_names_line_column_and_hint() {
    let dir = tempfile::tempdir().unwrap();
    let ion = write(
        dir.path(),
        "bad.ion",
        "tone >a\nmix <a >b:fl(8 4096)\nnull <b\n",
    );
    let o = run_in(dir.path(), &["run", ion.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("bad.ion: line 2, column 16: expected ','"),
        "{err}"
    );
    assert!(err.contains("hint: write free_list(count,size)"), "{err}");

    let ion = write(dir.path(), "unknown.ion", "tone >a\nmux <a >b\nnull <b\n");
    let err = text(&run_in(dir.path(), &["run", ion.to_str().unwrap()]).stderr);
    assert!(
        err.contains("line 2, column 1: unknown task 'mux'; known tasks: alaw"),
        "{err}"
    );
}

#[test]
fn failing_task_stops_the_pipeline_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let ion = write(
        dir.path(),
        "fail.ion",
        "wav path=missing.wav >a\nmulaw <a >b\nfile path=out.ul <b\ntone >c\nnull <c\n",
    );
    let o = run_in(dir.path(), &["run", ion.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("task 'wav' (line 1) failed: read missing.wav"),
        "{err}"
    );
    // The endless tone was stopped and every task finished: the table was printed.
    let out = text(&o.stdout);
    assert!(out.contains("tone") && out.contains("free list"), "{out}");
    assert!(
        dir.path().join("out.ul").exists(),
        "the sink was closed cleanly"
    );
}

#[test]
fn host_in_from_stdin_to_host_out_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let ion = write(
        dir.path(),
        "echo.ion",
        "host-in name=in >a:p(4,1000)\ncrc32c <a >b\nhost-out name=out <b\n",
    );
    let mut child = offhost()
        .current_dir(dir.path())
        .args(["run", ion.to_str().unwrap(), "--out", "out=-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let mut stdin = child.stdin.take().unwrap();
    let d = data.clone();
    let feeder = std::thread::spawn(move || {
        stdin.write_all(&d).unwrap();
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(o.stdout, data);
    let table = text(&o.stderr);
    assert!(
        table.contains(&format!("crc32c=0x{:08x}", crc32c::crc32c(&data))),
        "{table}"
    );
}

#[test]
fn tasks_lists_builtins_with_arguments() {
    let o = offhost().args(["tasks"]).output().unwrap();
    assert!(o.status.success());
    let out = text(&o.stdout);
    for name in [
        "tone", "wav", "file", "random", "host-in", "null", "host-out", "dup", "mix", "rate",
        "mulaw", "alaw", "crc32c", "count", "head",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name} missing:\n{out}"
        );
    }
    assert!(out.contains("freq=440"), "{out}");
    #[cfg(feature = "wasm")]
    assert!(
        out.lines().any(|l| l.starts_with("wasm ")) && out.contains("deadline=1s"),
        "{out}"
    );
    let o = offhost().args(["tasks", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rate = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "rate")
        .unwrap();
    assert_eq!(rate["args"][1]["name"], "to");
    let o = offhost().args(["tasks", "nope"]).output().unwrap();
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("known tasks"));
}

#[test]
fn engine_daemon_runs_submitted_pipelines() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("tcp:127.0.0.1:{port}");
    let _d = Reaped(
        offhost()
            .current_dir(dir.path())
            .args(["engine", "--insecure", "--listen", &url])
            // The example writes loudspeaker.wav: submitted pipelines open files beneath this.
            .arg("--files")
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ion = repo_root().join("examples/audio.ion");
    // The daemon needs a moment to listen; retry the connection for a bounded time.
    let mut o = None;
    for _ in 0..50 {
        let r = run_in(
            dir.path(),
            &[
                "submit",
                "--engine",
                &url,
                ion.to_str().unwrap(),
                "--out",
                "host=phone.ul",
            ],
        );
        if r.status.success() || !text(&r.stderr).contains("connect to") {
            o = Some(r);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let o = o.expect("the daemon never accepted a connection");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("finished"), "{}", text(&o.stdout));
    let ul = std::fs::metadata(dir.path().join("phone.ul"))
        .unwrap()
        .len();
    assert!((80_000..80_100).contains(&ul), "{ul}");
    // A bad pipeline is refused with its position; the daemon keeps serving.
    let bad = write(dir.path(), "bad.ion", "tone >a\nnull <b\n");
    let o = run_in(
        dir.path(),
        &["submit", "--engine", &url, bad.to_str().unwrap()],
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("line 1, column 7: queue 'a' is written but no task reads it"),
        "{}",
        text(&o.stderr)
    );
    // A table by default, JSON with --json.
    let o = run_in(dir.path(), &["submit", "--engine", &url, "--list"]);
    let listed = text(&o.stdout);
    assert!(o.status.success(), "{listed}");
    assert!(listed.starts_with("    id  name"), "{listed}");
    assert!(
        listed
            .lines()
            .skip(1)
            .all(|l| l.contains(" finished ") || l.contains(" failed ")),
        "{listed}"
    );
    let o = run_in(
        dir.path(),
        &["submit", "--engine", &url, "--list", "--json"],
    );
    assert!(
        o.status.success() && text(&o.stdout).contains("\"finished\""),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn engine_flags_out_of_range_are_errors_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let sock = format!("unix:{}", dir.path().join("e.sock").display());
    let out = run_in(
        dir.path(),
        &["engine", "--listen", &sock, "--max-message", "5G"],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("--max-message 5368709120: at most 4 GiB - 1"),
        "{err}"
    );
}

#[test]
fn a_pipeline_over_its_budget_names_the_limit_once_and_the_flag_that_raises_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.ion",
        "fill bytes=1k >a\nnull <a\nfill bytes=1k >b\nnull <b\n",
    );
    let out = run_in(
        dir.path(),
        &["run", "--max-tasks", "2", p.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    // The library names the limit; the command line adds its own flag.
    assert!(
        err.contains(
            "the pipeline has 4 tasks, over the limit max_tasks of 2 tasks (raise it with --max-tasks)"
        ),
        "{err}"
    );
    assert_eq!(err.matches("over the limit").count(), 1, "{err}");
}

/// The flag the libraries give each limit for the command line is one of its commands'.
#[test]
fn every_limit_is_a_flag_of_the_commands_that_take_it() {
    let dir = tempfile::tempdir().unwrap();
    for l in offhost_units::Limit::ALL {
        for c in l.commands() {
            let help = text(&run_in(dir.path(), &[c, "--help"]).stdout);
            assert!(
                help.contains(&format!("{} ", l.flag())),
                "offhost {c} has no {}",
                l.flag()
            );
        }
    }
}
