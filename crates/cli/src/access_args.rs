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
    /// Seconds an engine may send nothing, not even a heartbeat, before it is taken for
    /// stopped, frozen or cut off, and the job fails naming it (0: never).
    #[arg(long, default_value = "10", value_parser = offhost_units::parse_seconds)]
    pub peer_deadline: std::time::Duration,
}

impl ConnectAccess {
    /// The link options these flags say.
    pub fn link_options(&self) -> anyhow::Result<LinkOptions> {
        let o = offhost_link::peer_deadline_flag(self.peer_deadline).map_err(anyhow::Error::msg)?;
        let o = LinkOptions::new().peer_deadline(o);
        Ok(match &self.tls_certificates {
            Some(d) => o.tls_certificates(d),
            None => o,
        })
    }
}
