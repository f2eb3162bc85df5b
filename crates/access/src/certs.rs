//! The certificate directory (nbdkit/libnbd layout) and its generation.
//!
//! | file | what |
//! |---|---|
//! | `ca-cert.pem` | the CA both sides trust |
//! | `server-cert.pem`, `server-key.pem` | the server's certificate (signed by the CA) and key |
//! | `client-cert.pem`, `client-key.pem` | the client's certificate (signed by the CA) and key |
//!
//! nbdkit's `--tls-certificates DIR`, libnbd's `tls-certificates=DIR` and qemu's
//! `tls-creds-x509,dir=DIR` read the same names, so one directory serves them all.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::error::AccessError;

/// The CA certificate's file name.
pub const CA_CERT: &str = "ca-cert.pem";
/// The server certificate's file name.
pub const SERVER_CERT: &str = "server-cert.pem";
/// The server key's file name.
pub const SERVER_KEY: &str = "server-key.pem";
/// The client certificate's file name.
pub const CLIENT_CERT: &str = "client-cert.pem";
/// The client key's file name.
pub const CLIENT_KEY: &str = "client-key.pem";

/// A certificate directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertDir {
    dir: PathBuf,
}

impl CertDir {
    /// The directory at `dir` (nothing is read yet).
    pub fn new(dir: impl Into<PathBuf>) -> CertDir {
        CertDir { dir: dir.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The path of `name` in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether the client certificate and key are there.
    pub fn has_client_identity(&self) -> bool {
        self.file(CLIENT_CERT).is_file() && self.file(CLIENT_KEY).is_file()
    }
}

/// Host names every server certificate carries besides the ones asked for.
pub const DEFAULT_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Creates a CA and a server and a client certificate in `dir` (created owner-only if it does
/// not exist), every file mode 0600. The server certificate names `localhost`, `127.0.0.1`,
/// `::1` and `hosts` (DNS names or IP addresses). Files already there are not overwritten:
/// the call fails instead.
///
/// The certificates carry what GnuTLS (libnbd, qemu) insists on: the CA has basic constraints
/// `CA:TRUE` and may sign certificates; the server's and client's say digital signature, and
/// TLS server or TLS client authentication respectively.
pub fn generate(dir: &Path, hosts: &[String]) -> Result<CertDir, AccessError> {
    generate_with_engines(dir, hosts, &[])
}

/// Makes `dir` (owner-only) if it is not there, and fails if any of the five files is.
fn fresh_dir(dir: &Path) -> Result<CertDir, AccessError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(AccessError::file(dir))?;
    let out = CertDir::new(dir);
    for name in [CA_CERT, SERVER_CERT, SERVER_KEY, CLIENT_CERT, CLIENT_KEY] {
        let p = out.file(name);
        if p.exists() {
            return Err(AccessError::File {
                path: p,
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "already exists; remove the old certificates first",
                ),
            });
        }
    }
    Ok(out)
}

/// As [`generate`], and for each engine name in `engines` a directory `dir/engines/NAME` of
/// the same layout: the same CA, and a server and a client certificate of the engine's own
/// that name it ([`crate::identity::engine_dns_name`]; the server certificate also names the
/// hosts), which an engine started with it presents to the engines it links to and that
/// link to it. Names are those of engines (1 to 64 of
/// `A-Z a-z 0-9 . _ -`) that make a DNS name.
pub fn generate_with_engines(
    dir: &Path,
    hosts: &[String],
    engines: &[String],
) -> Result<CertDir, AccessError> {
    for e in engines {
        let ok = !e.is_empty()
            && e.len() <= 64
            && e.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            && rustls::pki_types::ServerName::try_from(crate::identity::engine_dns_name(e)).is_ok();
        if !ok {
            return Err(AccessError::EngineName(format!(
                "engine name {e:?}: use 1 to 64 of A-Z a-z 0-9 . _ - that make a DNS name"
            )));
        }
    }
    let out = fresh_dir(dir)?;
    let engine_dirs = engines
        .iter()
        .map(|e| fresh_dir(&dir.join("engines").join(e)))
        .collect::<Result<Vec<_>, _>>()?;

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, "offhost CA");
    ca.distinguished_name
        .push(DnType::OrganizationName, "offhost");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;

    let mut names: Vec<String> = DEFAULT_HOSTS.iter().map(|s| s.to_string()).collect();
    for h in hosts {
        if !names.contains(h) {
            names.push(h.clone());
        }
    }
    let cn = hosts.first().map_or("localhost", |h| h);
    let issue = |cn: &str,
                 names: Vec<String>,
                 usage: ExtendedKeyUsagePurpose|
     -> Result<(String, String), AccessError> {
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::new(names)?;
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.distinguished_name
            .push(DnType::OrganizationName, "offhost");
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![usage];
        p.use_authority_key_identifier_extension = true;
        let cert = p.signed_by(&key, &ca_cert, &ca_key)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let write = |d: &CertDir,
                 (server_cert, server_key): (String, String),
                 (cert, key): (String, String)|
     -> Result<(), AccessError> {
        write_private(&d.file(CA_CERT), &ca_cert.pem())?;
        write_private(&d.file(SERVER_CERT), &server_cert)?;
        write_private(&d.file(SERVER_KEY), &server_key)?;
        write_private(&d.file(CLIENT_CERT), &cert)?;
        write_private(&d.file(CLIENT_KEY), &key)
    };
    let server = ExtendedKeyUsagePurpose::ServerAuth;
    let client = ExtendedKeyUsagePurpose::ClientAuth;
    write(
        &out,
        issue(cn, names.clone(), server.clone())?,
        issue("offhost client", Vec::new(), client.clone())?,
    )?;
    // Each engine's certificates name it, as a server (for the engines that link to it) and
    // as a client (for those it links to).
    for (e, d) in engines.iter().zip(&engine_dirs) {
        let name = crate::identity::engine_dns_name(e);
        let mut server_names = names.clone();
        server_names.push(name.clone());
        write(
            d,
            issue(cn, server_names, server.clone())?,
            issue(&format!("offhost engine {e}"), vec![name], client.clone())?,
        )?;
    }
    Ok(out)
}

/// Writes a new file, mode 0600 from its creation (never readable by others, not even for a
/// moment).
fn write_private(path: &Path, text: &str) -> Result<(), AccessError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(AccessError::file(path))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(AccessError::file(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn generates_the_five_files_owner_only_and_refuses_to_overwrite() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("pki");
        generate(&dir, &["engine.example".into()]).unwrap();
        for f in [CA_CERT, SERVER_CERT, SERVER_KEY, CLIENT_CERT, CLIENT_KEY] {
            let m = std::fs::metadata(dir.join(f)).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "{f}");
        }
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        assert!(CertDir::new(&dir).has_client_identity());
        let again = generate(&dir, &[]).unwrap_err();
        assert!(again.to_string().contains("already exists"), "{again}");
    }

    #[test]
    fn engine_directories_hold_certificates_that_name_their_engine() {
        use rustls::pki_types::pem::PemObject;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("pki");
        let engines = ["alpha".to_string(), "Beta.2".to_string()];
        generate_with_engines(&dir, &[], &engines).unwrap();
        let der = |p: PathBuf| {
            rustls::pki_types::CertificateDer::from_pem_file(p)
                .unwrap()
                .to_vec()
        };
        let alpha = dir.join("engines/alpha");
        for f in [CA_CERT, SERVER_CERT, SERVER_KEY, CLIENT_CERT, CLIENT_KEY] {
            let m = std::fs::metadata(alpha.join(f)).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "{f}");
        }
        assert_eq!(
            std::fs::read(alpha.join(CA_CERT)).unwrap(),
            std::fs::read(dir.join(CA_CERT)).unwrap()
        );
        let a = der(alpha.join(CLIENT_CERT));
        assert!(crate::identity::names_engine(&a, "alpha"));
        assert!(
            crate::identity::names_engine(&a, "ALPHA"),
            "names compare without case"
        );
        assert!(!crate::identity::names_engine(&a, "beta.2"));
        let b = der(dir.join("engines/Beta.2").join(CLIENT_CERT));
        assert!(crate::identity::names_engine(&b, "beta.2"));
        let server = der(alpha.join(SERVER_CERT));
        assert!(crate::identity::names_engine(&server, "alpha"));
        assert!(!crate::identity::names_engine(
            &der(dir.join(SERVER_CERT)),
            "alpha"
        ));
        let generic = der(dir.join(CLIENT_CERT));
        assert!(!crate::identity::names_engine(&generic, "alpha"));
        assert!(!crate::identity::names_engine(
            b"not a certificate",
            "alpha"
        ));
        let bad = generate_with_engines(&d.path().join("x"), &[], &["a/b".into()]).unwrap_err();
        assert!(bad.to_string().contains("engine name \"a/b\""), "{bad}");
    }
}
