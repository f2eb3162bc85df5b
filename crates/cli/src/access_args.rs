//! The access flags every listener and client of the CLI shares.

use std::path::PathBuf;

use offhost_link::LinkOptions;

/// Who may reach a server.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeAccess {
    /// Certificate directory for tls: listeners, in nbdkit's layout (ca-cert.pem,
    /// server-cert.pem, server-key.pem; clients need a certificate signed by ca-cert.pem).
    /// `offhost certs DIR` creates one.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// Allow listening on plain tcp: (no authentication, no encryption: whoever reaches the
    /// port controls the server). Without it a tcp: listener refuses to start; use tls:HOST:PORT
    /// with --tls-certificates, or a unix: socket.
    #[arg(long)]
    pub insecure: bool,
    /// Also admit peers running as this uid on unix: and shm: sockets (checked with
    /// SO_PEERCRED; by default only our own uid). Repeatable.
    #[arg(long = "allow-uid", value_name = "UID")]
    pub allow_uids: Vec<u32>,
}

impl ServeAccess {
    /// The link options these flags say.
    pub fn link_options(&self) -> LinkOptions {
        let o = LinkOptions::new()
            .insecure(self.insecure)
            .allow_uids(self.allow_uids.iter().copied());
        match &self.tls_certificates {
            Some(d) => o.tls_certificates(d),
            None => o,
        }
    }
}

/// How a client authenticates.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConnectAccess {
    /// Certificate directory for tls: URLs, in nbdkit's layout (ca-cert.pem to check the
    /// server, client-cert.pem and client-key.pem to present). `offhost certs DIR` creates one.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
}

impl ConnectAccess {
    /// The link options these flags say.
    pub fn link_options(&self) -> LinkOptions {
        match &self.tls_certificates {
            Some(d) => LinkOptions::new().tls_certificates(d),
            None => LinkOptions::new(),
        }
    }
}

/// The engine daemon's default address: a Unix socket of this user's (owner-only, peers of
/// other uids refused), in `$XDG_RUNTIME_DIR` or `/tmp`.
pub fn default_engine_url() -> String {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let uid = offhost_access::peer::own_uid();
    format!(
        "unix:{}",
        dir.join(format!("offhost-engine-{uid}.sock")).display()
    )
}
