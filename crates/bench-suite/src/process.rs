//! The one way to start and reap a peer in another process: `offhost echo` for the raw ring
//! and shm channels, `offhost nbd` and nbdkit for the NBD bench. Started with its output
//! silenced, waited for until it answers (failing at once if it exits first), and on the way
//! out given a grace period to end on its own before it is killed; dropped, it is killed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Context as _, Error, Result};

/// How long a peer may take to answer after it was started.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer whose host hung up may take to exit before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// A peer process, killed and reaped when dropped.
#[derive(Debug)]
pub struct PeerProcess {
    name: String,
    child: Option<Child>,
}

impl PeerProcess {
    /// Starts `cmd` as the peer called `name` (in messages), stdin and stdout silenced.
    pub fn spawn(name: &str, cmd: &mut Command) -> Result<PeerProcess> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("start the {name} ({cmd:?})"))?;
        Ok(PeerProcess {
            name: name.into(),
            child: Some(child),
        })
    }

    /// Starts `cmd` as the peer called `name` with its stdout and stderr piped to us (see
    /// [`take_stdout`](Self::take_stdout), [`take_stderr`](Self::take_stderr)).
    pub fn spawn_piped(name: &str, cmd: &mut Command) -> Result<PeerProcess> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start the {name} ({cmd:?})"))?;
        Ok(PeerProcess {
            name: name.into(),
            child: Some(child),
        })
    }

    /// Starts `cmd` as the peer called `name`, stdin silenced, with its standard output read
    /// line by line on a thread: the lines come through the receiver (a server that prints
    /// its address once it listens, like `offhost nbd --listen tcp:HOST:0`).
    pub fn spawn_with_lines(
        name: &str,
        cmd: &mut Command,
    ) -> Result<(PeerProcess, std::sync::mpsc::Receiver<String>)> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("start the {name} ({cmd:?})"))?;
        let out = child.stdout.take().expect("stdout was piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name} stdout"))
            .spawn(move || {
                // Read to the end even when nobody listens any more, so that the peer never
                // blocks on a full pipe.
                for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
                    let Ok(l) = line else { return };
                    let _ = tx.send(l);
                }
            })?;
        let p = PeerProcess {
            name: name.into(),
            child: Some(child),
        };
        Ok((p, rx))
    }

    /// Starts `offhost echo ARGS` from the `offhost` binary at `exe`, its stderr silenced.
    pub fn echo(exe: &Path, args: &[String]) -> Result<PeerProcess> {
        let mut cmd = Command::new(exe);
        cmd.arg("echo").args(args).stderr(Stdio::null());
        PeerProcess::spawn("echo engine", &mut cmd)
    }

    /// The peer's standard error, when the command piped it (once).
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.as_mut()?.stderr.take()
    }

    /// The peer's standard output, when the command piped it (once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut()?.stdout.take()
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("present until reaped")
    }

    /// Calls `probe` until it succeeds, for at most `within`: the peer is ready when it does.
    /// Fails at once, with the last probe's error, if the peer exits first.
    pub fn until_ready<T, E: Into<Error>>(
        &mut self,
        within: Duration,
        mut probe: impl FnMut() -> std::result::Result<T, E>,
    ) -> Result<T> {
        let start = Instant::now();
        loop {
            let e = match probe() {
                Ok(t) => return Ok(t),
                Err(e) => e,
            };
            if let Some(status) = self.child().try_wait()? {
                return Err(e).with_context(|| format!("{} exited ({status}) first", self.name));
            }
            if start.elapsed() > within {
                return Err(e).with_context(|| {
                    format!("{} was not ready within {} s", self.name, within.as_secs())
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits up to `grace` for the peer to exit (its host hung up), then kills it; true when
    /// it had to be killed.
    pub fn reap(mut self, grace: Duration) -> Result<bool> {
        let deadline = Instant::now() + grace;
        while self.child().try_wait()?.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.child().try_wait()?.is_some() {
            self.child = None;
            return Ok(false);
        }
        drop(self); // kills and waits
        Ok(true)
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A unique abstract socket name for a peer of this process: `@offhost-bench-{what}-{pid}-{n}`.
pub fn unique_name(what: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("@offhost-bench-{what}-{}-{n}", std::process::id())
}

/// Fails unless `path` exists: the probe of a peer that is ready once it wrote a file.
pub fn exists(path: &Path) -> Result<PathBuf> {
    if path.exists() {
        Ok(path.to_path_buf())
    } else {
        Err(Error::Peer(format!(
            "{} does not exist yet",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> PeerProcess {
        PeerProcess::spawn("test peer", Command::new("sh").args(["-c", script])).unwrap()
    }

    #[test]
    fn a_peer_that_exits_on_its_own_is_not_killed() {
        let p = sh("exit 0");
        assert!(!p.reap(EXIT_GRACE).unwrap());
    }

    #[test]
    fn a_peer_that_stays_is_killed_after_the_grace() {
        let p = sh("sleep 30");
        let t = Instant::now();
        assert!(p.reap(Duration::from_millis(100)).unwrap());
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn waiting_for_a_peer_that_died_fails_at_once_with_both_reasons() {
        let mut p = sh("exit 3");
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let t = Instant::now();
        let e = p.until_ready(START_TIMEOUT, || exists(&ready)).unwrap_err();
        assert!(t.elapsed() < START_TIMEOUT);
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(
            text.contains("test peer exited") && text.contains("does not exist"),
            "{text}"
        );
    }

    #[test]
    fn a_peer_is_ready_when_its_probe_succeeds_and_dropping_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let mut p = sh(&format!("touch {}; sleep 30", ready.display()));
        assert_eq!(
            p.until_ready(START_TIMEOUT, || exists(&ready)).unwrap(),
            ready
        );
        let pid = p.id();
        drop(p);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "not reaped");
    }

    #[test]
    fn a_peer_is_ready_once_it_printed_the_line_waited_for() {
        let (mut p, lines) = PeerProcess::spawn_with_lines(
            "test peer",
            Command::new("sh").args(["-c", "echo starting; echo listening on x:1; sleep 30"]),
        )
        .unwrap();
        let addr = p
            .until_ready(START_TIMEOUT, || loop {
                match lines.try_recv() {
                    Ok(l) => match l.strip_prefix("listening on ") {
                        Some(a) => return Ok(a.to_owned()),
                        None => continue,
                    },
                    Err(_) => return Err(Error::Peer("not yet".into())),
                }
            })
            .unwrap();
        assert_eq!(addr, "x:1");
        assert!(
            p.reap(Duration::from_millis(50)).unwrap(),
            "killed after the grace"
        );
    }

    #[test]
    fn names_are_unique() {
        assert_ne!(unique_name("x"), unique_name("x"));
    }
}
