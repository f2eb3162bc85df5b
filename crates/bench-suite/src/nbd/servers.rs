//! The servers `bench nbd` measures, and who fio runs as to reach them.
//!
//! Without TLS: offhost and nbdkit on Unix sockets, as always. With TLS: both plain and both
//! with `--tls=require --tls-certificates DIR --tls-verify-peer`, all four on TCP loopback (TLS
//! is how NBD crosses a network; the plain ones with `--insecure`), so that a TLS server and its
//! plain self differ by TLS alone.
//!
//! fio's `nbd` engine hands its URI to `nbd_connect_uri` without allowing local files, so a
//! `tls-certificates=DIR` in the URI is refused; libnbd then looks for the certificates in
//! `$HOME/.pki/libnbd`, but only for a user other than root (root's are in
//! `/etc/pki/libnbd`). So with TLS every fio job (plain or not, so that the client is the same)
//! runs with `HOME` at a directory holding a copy of the CA and client certificate and key,
//! and, when the bench runs as root, as `nobody` (uid and gid 65534), that `HOME` then a
//! temporary directory of its own in `/tmp` (which `nobody` can reach whatever `TMPDIR`'s
//! permissions are).

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use offhost_access::certs::{CA_CERT, CLIENT_CERT, CLIENT_KEY};
use offhost_bench::cpu::process_cpu_s;

use super::Options;
use crate::error::{Context as _, Error, Result};
use crate::process::{exists, PeerProcess};
use crate::tls::Pki;

/// How long a server may take to listen.
const START: Duration = Duration::from_secs(20);

/// The user fio runs as when the bench runs as root and needs a `HOME` of its own (`nobody`).
const NOBODY: u32 = 65534;

/// A server under test.
pub(super) struct Server {
    /// `offhost` or `nbdkit-memory`, with `-tls` when reached over TLS.
    pub name: String,
    process: PeerProcess,
    /// What fio's `nbd` engine connects to.
    pub uri: String,
    /// Whether fio reaches it over TLS.
    pub tls: bool,
    /// `unix` or `tcp`.
    pub transport: &'static str,
    /// Index of the same server without TLS (TLS servers only).
    pub plain: Option<usize>,
    /// Index of nbdkit with the same TLS setting (offhost servers only).
    pub kit: Option<usize>,
    /// Its standard error.
    log: PathBuf,
}

impl Server {
    /// A server just started, not yet paired with its plain or nbdkit counterpart.
    fn started(
        name: String,
        process: PeerProcess,
        uri: String,
        tcp: bool,
        tls: bool,
        log: PathBuf,
    ) -> Server {
        Server {
            name,
            process,
            uri,
            tls,
            transport: if tcp { "tcp" } else { "unix" },
            plain: None,
            kit: None,
            log,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// CPU seconds (user + system) the server has used so far.
    pub fn cpu_s(&self) -> f64 {
        process_cpu_s(Some(self.process.id())).unwrap_or(0.0)
    }

    /// The last lines the server wrote to its standard error (for a failure's message).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
}

/// Who fio runs as, and with which `HOME`.
#[derive(Debug, Default)]
pub(super) struct Client {
    home: Option<PathBuf>,
    uid: Option<u32>,
    /// The `HOME` made for `nobody`, removed with the client.
    _own: Option<tempfile::TempDir>,
}

impl Client {
    /// Sets `cmd` (fio) to run as this client.
    pub fn apply(&self, cmd: &mut Command) {
        if let Some(h) = &self.home {
            cmd.env("HOME", h);
        }
        if let Some(u) = self.uid {
            std::os::unix::process::CommandExt::uid(cmd, u);
            std::os::unix::process::CommandExt::gid(cmd, u);
        }
    }
}

/// A free TCP port on loopback (for nbdkit, which cannot say which port 0 gave it).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The TLS flags both servers take, nbdkit's meaning.
fn tls_args(certs: Option<&Path>) -> Vec<String> {
    match certs {
        Some(d) => vec![
            "--tls=require".into(),
            "--tls-certificates".into(),
            d.display().to_string(),
            "--tls-verify-peer".into(),
        ],
        None => vec![],
    }
}

/// `nbd://` or `nbds://` on loopback.
fn tcp_uri(tls: bool, port: u16) -> String {
    let scheme = if tls { "nbds" } else { "nbd" };
    format!("{scheme}://127.0.0.1:{port}/")
}

/// Starts `offhost nbd` with `extra` flags: on a Unix socket in `dir`, or on TCP loopback
/// (port 0: the address it prints once it listens says which).
fn start_offhost(
    a: &Options,
    dir: &Path,
    name: String,
    tcp: bool,
    certs: Option<&Path>,
) -> Result<Server> {
    let log = dir.join(format!("{name}.log"));
    let sock = dir.join(format!("{name}.sock"));
    let listen = match tcp {
        true => "tcp:127.0.0.1:0".to_owned(),
        false => format!("unix:{}", sock.display()),
    };
    let mut cmd = Command::new(&a.exe);
    cmd.args(["nbd", "--listen", &listen])
        .args(["--export", &format!("bench=mem:{}", a.size)])
        .args(["--conn-threads", &a.conn_threads.to_string()])
        .args(tls_args(certs))
        .stderr(Stdio::from(std::fs::File::create(&log)?));
    if tcp && certs.is_none() {
        cmd.arg("--insecure"); // loopback, measured beside its TLS self
    }
    let (process, uri) = if tcp {
        let (mut p, lines) = PeerProcess::spawn_with_lines(&name, &mut cmd)?;
        let port = p.until_ready(START, || listening_port(&lines))?;
        (p, tcp_uri(certs.is_some(), port))
    } else {
        let mut p = PeerProcess::spawn(&name, &mut cmd)?;
        p.until_ready(START, || exists(&sock))?;
        (p, format!("nbd+unix:///?socket={}", sock.display()))
    };
    Ok(Server::started(
        name,
        process,
        uri,
        tcp,
        certs.is_some(),
        log,
    ))
}

/// The port of `offhost nbd`'s `listening on tcp:HOST:PORT` line, once it came.
fn listening_port(lines: &Receiver<String>) -> Result<u16> {
    loop {
        match lines.try_recv() {
            Ok(l) => {
                let port = l
                    .strip_prefix("listening on tcp:")
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| p.parse().ok());
                if let Some(p) = port {
                    return Ok(p);
                }
            }
            Err(TryRecvError::Empty) => {
                return Err(Error::Peer("offhost nbd is not listening yet".into()))
            }
            Err(TryRecvError::Disconnected) => {
                return Err(Error::Peer(
                    "offhost nbd closed its output without saying where it listens".into(),
                ))
            }
        }
    }
}

/// Starts nbdkit's memory plugin: on a Unix socket in `dir`, or on a free TCP loopback port.
/// Ready once its pid file exists (written once it listens; probing by connecting would make
/// it log a broken handshake).
fn start_nbdkit(
    a: &Options,
    dir: &Path,
    name: String,
    tcp: bool,
    certs: Option<&Path>,
) -> Result<Server> {
    let log = dir.join(format!("{name}.log"));
    let pid = dir.join(format!("{name}.pid"));
    let sock = dir.join(format!("{name}.sock"));
    let mut cmd = Command::new(&a.nbdkit);
    cmd.arg("-f");
    let uri = if tcp {
        let port = free_port()?;
        cmd.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
        tcp_uri(certs.is_some(), port)
    } else {
        cmd.arg("-U").arg(&sock);
        format!("nbd+unix:///?socket={}", sock.display())
    };
    cmd.arg("-P")
        .arg(&pid)
        .args(tls_args(certs))
        .args(["memory", &a.size])
        .stderr(Stdio::from(std::fs::File::create(&log)?));
    let mut process = PeerProcess::spawn(&name, &mut cmd)?;
    process.until_ready(START, || exists(&pid))?;
    Ok(Server::started(
        name,
        process,
        uri,
        tcp,
        certs.is_some(),
        log,
    ))
}

/// Starts offhost and nbdkit, plain and (with `pki`) over TLS, with their sockets and logs in
/// `dir`: offhost first, then nbdkit, for each setting. With `pki`, also the client fio runs as.
pub(super) fn start(a: &Options, dir: &Path, pki: Option<&Pki>) -> Result<(Vec<Server>, Client)> {
    let tcp = pki.is_some();
    let mut servers: Vec<Server> = Vec::new();
    for certs in std::iter::once(None).chain(pki.map(|p| Some(p.dir()))) {
        let suffix = if certs.is_some() { "-tls" } else { "" };
        let first = servers.len();
        let mut ours = start_offhost(a, dir, format!("offhost{suffix}"), tcp, certs)?;
        let mut kit = start_nbdkit(a, dir, format!("nbdkit-memory{suffix}"), tcp, certs)
            .context("nbdkit is the peer of this benchmark")?;
        ours.kit = Some(first + 1);
        if certs.is_some() {
            (ours.plain, kit.plain) = (Some(0), Some(1));
        }
        servers.push(ours);
        servers.push(kit);
    }
    let client = match pki {
        Some(p) => client(dir, p)?,
        None => Client::default(),
    };
    Ok((servers, client))
}

/// A `HOME` whose `.pki/libnbd` holds the CA and the client certificate and key of `pki`: in
/// `dir`, or (when we are root) in a temporary directory of `/tmp` given to `nobody`, whom fio
/// then runs as.
fn client(dir: &Path, pki: &Pki) -> Result<Client> {
    let root = offhost_access::peer::own_uid() == 0;
    let own = match root {
        true => Some(
            tempfile::Builder::new()
                .prefix("offhost-fio")
                .tempdir_in("/tmp")?,
        ),
        false => None,
    };
    let home = match &own {
        Some(t) => t.path().to_owned(),
        None => dir.join("fio-home"),
    };
    let certs = home.join(".pki").join("libnbd");
    std::fs::create_dir_all(&certs)?;
    let mut given = vec![home.clone(), home.join(".pki"), certs.clone()];
    for f in [CA_CERT, CLIENT_CERT, CLIENT_KEY] {
        std::fs::copy(pki.dir().join(f), certs.join(f))
            .with_context(|| format!("copy {f} for fio"))?;
        given.push(certs.join(f));
    }
    if root {
        for p in &given {
            std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY))
                .with_context(|| format!("give {} to nobody for fio", p.display()))?;
        }
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(Client {
        home: Some(home),
        uid: root.then_some(NOBODY),
        _own: own,
    })
}
