//! Three `offhost engine` processes on loopback or in network namespaces, linked by mutual
//! TLS, and the `offhost` commands of the tests that run placed jobs on them.
#![allow(dead_code)] // not every test file uses every helper

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::Reaped;

pub const BIN: &str = env!("CARGO_BIN_EXE_offhost");
pub const NAMES: [&str; 3] = ["a", "b", "c"];

pub fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// The longest one `offhost` command of these tests may run: past it, it is killed and the
/// test fails (a hang is a failure, not a stuck test).
pub const COMMAND_LIMIT: Duration = Duration::from_secs(120);

pub fn offhost(args: &[&str], dir: &Path) -> Output {
    use std::io::Read;
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_BACKTRACE", "0")
        .spawn()
        .expect("run offhost");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + COMMAND_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for offhost") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("offhost {args:?} ran past {COMMAND_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Three engines over TLS with one CA, each writing files beneath its own directory.
pub struct Engines {
    pub procs: Vec<Reaped>,
    pub urls: Vec<String>,
    pub files: Vec<PathBuf>,
    pub pki: PathBuf,
    pub _dir: tempfile::TempDir,
}

impl Engines {
    pub fn start(extra: &[&str]) -> Engines {
        Engines::start_in(None, extra)
    }

    /// The engines in the namespaces of `net` (each listening on its address), or on loopback.
    pub fn start_in(net: Option<&Netns>, extra: &[&str]) -> Engines {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let mut certs = vec!["certs", pki.to_str().unwrap()];
        if let Some(net) = net {
            for a in &net.addrs {
                certs.extend(["--host", a.as_str()]);
            }
        }
        let o = offhost(&certs, dir.path());
        assert!(o.status.success(), "{}", text(&o.stderr));
        let (mut procs, mut urls, mut files) = (Vec::new(), Vec::new(), Vec::new());
        for (i, n) in NAMES.iter().enumerate() {
            let f = dir.path().join(format!("files-{n}"));
            std::fs::create_dir(&f).unwrap();
            let listen = match net {
                Some(net) => format!("tls:{}:7460", net.addrs[i]),
                None => "tls:127.0.0.1:0".into(),
            };
            let prefix: Vec<&str> = match net {
                Some(net) => vec!["ip", "netns", "exec", &net.names[i]],
                None => Vec::new(),
            };
            let mut args = vec!["--name", n, "--tls-certificates", pki.to_str().unwrap()];
            args.extend(["--files", f.to_str().unwrap(), "--listen", &listen]);
            args.extend(extra);
            let (child, mut url) = common::engine_in(&prefix, &args);
            let url = url.remove(0);
            procs.push(child);
            urls.push(url);
            files.push(f);
        }
        Engines {
            procs,
            urls,
            files,
            pki,
            _dir: dir,
        }
    }

    /// `--engine a=URL --engine b=URL --engine c=URL --tls-certificates PKI`.
    pub fn args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (n, u) in NAMES.iter().zip(&self.urls) {
            v.push("--engine".to_string());
            v.push(format!("{n}={u}"));
        }
        v.push("--tls-certificates".into());
        v.push(self.pki.to_str().unwrap().into());
        v
    }

    /// `submit --engine URL --tls-certificates PKI`: a submit to engine `i` alone, before its
    /// own arguments.
    pub fn submit_args(&self, i: usize) -> Vec<String> {
        let pki = self.pki.to_str().unwrap();
        [
            "submit",
            "--engine",
            &self.urls[i],
            "--tls-certificates",
            pki,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `offhost submit` to engine `i` alone with `args`, run in `dir`.
    pub fn submit_to(&self, i: usize, args: &[&str], dir: &Path) -> Output {
        let mut all = self.submit_args(i);
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        offhost(&all, dir)
    }

    /// Pipeline ids and states of engine `i`.
    pub fn states(&self, i: usize) -> Vec<String> {
        let o = self.submit_to(i, &["--list", "--json"], self.pki.parent().unwrap());
        assert!(o.status.success(), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["pipelines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["state"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Three network namespaces, each one "machine" with one address, joined by a bridge in this
/// namespace (where the submitter runs, at 10.233.0.1); deleted on drop.
pub struct Netns {
    pub names: Vec<String>,
    pub addrs: Vec<String>,
    pub bridge: String,
}

pub fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), text(&o.stderr).trim()))
    }
}

impl Netns {
    /// The namespaces, or `None` (the test is skipped, saying so) when not root and they
    /// cannot be made; as root on a machine that has iproute2 they must be.
    pub fn make_or_skip() -> Option<Netns> {
        let root = offhost_access::peer::own_uid() == 0;
        match Netns::make() {
            Ok(n) => Some(n),
            Err(e) if !root => {
                eprintln!("skipped: not root, no network namespaces here ({e})");
                None
            }
            Err(e) => panic!("root, but the namespaces could not be made: {e}"),
        }
    }

    pub fn make() -> Result<Netns, String> {
        let tag = std::process::id() % 100_000;
        let bridge = format!("ohbr{tag}");
        let mut net = Netns {
            names: Vec::new(),
            addrs: Vec::new(),
            bridge: bridge.clone(),
        };
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", "10.233.0.1/24", "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..3 {
            let ns = format!("ohe{tag}{i}");
            let (outer, inner) = (format!("ohv{tag}{i}o"), format!("ohv{tag}{i}i"));
            let addr = format!("10.233.0.{}", i + 2);
            ip(&["netns", "add", &ns])?;
            net.names.push(ns.clone());
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&["link", "set", &outer, "master", &bridge])?;
            ip(&["link", "set", &outer, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            net.addrs.push(addr);
        }
        Ok(net)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

pub fn submit(e: &Engines, file: &Path, extra: &[&str], dir: &Path) -> Output {
    let mut args: Vec<String> = vec!["submit".into()];
    args.extend(e.args());
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(file.to_str().unwrap().into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    offhost(&args, dir)
}

/// `offhost ARGS` started in `dir`, its standard error kept for [`kill_and_wait`].
pub fn spawn_offhost(args: &[String], dir: &Path) -> Reaped {
    Reaped(
        Command::new(BIN)
            .args(args)
            .current_dir(dir)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Kills engine `victim` of `e` and waits at most 20 s for `sub` to end: its status, how
/// long it took after the kill, and what it said on standard error.
pub fn kill_and_wait(
    e: &mut Engines,
    victim: usize,
    sub: &mut Reaped,
) -> (std::process::ExitStatus, Duration, String) {
    e.procs[victim].kill().unwrap();
    let killed = Instant::now();
    let status = loop {
        if let Some(s) = sub.try_wait().unwrap() {
            break s;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "{:?} still runs after engine {victim} was killed",
            sub.0
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = killed.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut sub.stderr.take().unwrap(), &mut err).unwrap();
    (status, took, err)
}
