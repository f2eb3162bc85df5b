//! `offhost certs DIR`: a CA and server and client certificates for TLS, in one command.

use std::path::PathBuf;

use anyhow::Context;

/// Arguments of `offhost certs`.
#[derive(clap::Args, Debug)]
pub struct CertsArgs {
    /// Directory to create them in (made owner-only if new). It gets ca-cert.pem,
    /// server-cert.pem, server-key.pem, client-cert.pem and client-key.pem (mode 0600), the
    /// layout nbdkit, libnbd (tls-certificates=DIR) and qemu (tls-creds-x509,dir=DIR) read.
    dir: PathBuf,
    /// A name the server certificate is also valid for (a DNS name or an IP address), besides
    /// localhost, 127.0.0.1 and ::1. Repeatable.
    #[arg(long = "host", value_name = "NAME")]
    hosts: Vec<String>,
    /// An engine to give certificates of its own: DIR/engines/NAME gets the same five files
    /// with a server and a client certificate that name the engine, for `offhost engine --name NAME
    /// --tls-certificates DIR/engines/NAME`; engines started with --certified-peers take
    /// only names such certificates prove. Repeatable.
    #[arg(long = "engine", value_name = "NAME")]
    engines: Vec<String>,
}

/// Runs `offhost certs`.
pub fn run(a: CertsArgs) -> anyhow::Result<()> {
    let dir = offhost_access::certs::generate_with_engines(&a.dir, &a.hosts, &a.engines)
        .with_context(|| format!("create certificates in {}", a.dir.display()))?;
    let mut names: Vec<String> = offhost_access::certs::DEFAULT_HOSTS
        .iter()
        .map(|s| s.to_string())
        .collect();
    names.extend(a.hosts.iter().cloned());
    println!(
        "certificates in {}: server valid for {}",
        dir.path().display(),
        names.join(", ")
    );
    println!(
        "give servers and clients --tls-certificates {}; copy the directory to the client's machine without server-key.pem",
        dir.path().display()
    );
    for e in &a.engines {
        println!(
            "engine {e}: --name {e} --tls-certificates {}",
            dir.path().join("engines").join(e).display()
        );
    }
    Ok(())
}
