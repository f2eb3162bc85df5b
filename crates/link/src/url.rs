//! Transport URLs.

use std::path::PathBuf;

use crate::error::LinkError;

/// Where a session connects or a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    /// `tcp:HOST:PORT`: plain TCP (`tcp:systemd` for a listener: a socket systemd passed).
    Tcp(String),
    /// `tls:HOST:PORT`: TCP with mutual TLS (`tls:systemd` for a listener, likewise).
    Tls(String),
    /// `unix:PATH`
    Unix(PathBuf),
    /// `mem:NAME`, in this process.
    Mem(String),
    /// `shm:ADDR`: shared-memory rings, set up over the Unix socket at ADDR (a path, or
    /// `@name` for an abstract socket).
    Shm(String),
}

impl Url {
    /// Parses `tcp:HOST:PORT`, `tls:HOST:PORT`, `unix:PATH`, `mem:NAME` or `shm:ADDR` (and
    /// `tcp:systemd`, `tls:systemd`: see `activation.rs`).
    pub fn parse(url: &str) -> Result<Url, LinkError> {
        let bad = |why| LinkError::BadUrl {
            url: url.to_owned(),
            why,
        };
        let (scheme, rest) = url
            .split_once(':')
            .ok_or_else(|| bad("expected SCHEME:ADDRESS"))?;
        if rest.is_empty() {
            return Err(bad("empty address"));
        }
        match scheme {
            "tcp" | "tls" => {
                // `systemd`: a listening socket passed by systemd (listeners only).
                if rest != crate::activation::SYSTEMD {
                    let (host, port) = rest
                        .rsplit_once(':')
                        .ok_or_else(|| bad("expected tcp:HOST:PORT or tls:HOST:PORT"))?;
                    if host.is_empty() || port.parse::<u16>().is_err() {
                        return Err(bad("expected HOST:PORT with a port from 0 to 65535"));
                    }
                }
                Ok(if scheme == "tcp" {
                    Url::Tcp(rest.to_owned())
                } else {
                    Url::Tls(rest.to_owned())
                })
            }
            "unix" => Ok(Url::Unix(PathBuf::from(rest))),
            "mem" => Ok(Url::Mem(rest.to_owned())),
            "shm" => Ok(Url::Shm(rest.to_owned())),
            _ => Err(bad("unknown scheme; use tls, tcp, unix, mem or shm")),
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Url::Tcp(a) => write!(f, "tcp:{a}"),
            Url::Tls(a) => write!(f, "tls:{a}"),
            Url::Unix(p) => write!(f, "unix:{}", p.display()),
            Url::Mem(n) => write!(f, "mem:{n}"),
            Url::Shm(a) => write!(f, "shm:{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_scheme() {
        assert_eq!(
            Url::parse("tcp:127.0.0.1:80").unwrap(),
            Url::Tcp("127.0.0.1:80".into())
        );
        assert_eq!(
            Url::parse("tcp:[::1]:0").unwrap(),
            Url::Tcp("[::1]:0".into())
        );
        assert_eq!(
            Url::parse("unix:/tmp/x").unwrap(),
            Url::Unix("/tmp/x".into())
        );
        assert_eq!(
            Url::parse("tls:localhost:7").unwrap(),
            Url::Tls("localhost:7".into())
        );
        assert_eq!(
            Url::parse("tls:systemd").unwrap(),
            Url::Tls("systemd".into())
        );
        assert_eq!(
            Url::parse("tcp:systemd").unwrap(),
            Url::Tcp("systemd".into())
        );
        assert_eq!(Url::parse("mem:a").unwrap(), Url::Mem("a".into()));
        assert_eq!(Url::parse("shm:@e").unwrap(), Url::Shm("@e".into()));
    }

    #[test]
    fn rejects_bad_urls() {
        for u in [
            "",
            "tcp",
            "tcp:",
            "tcp:host",
            "tcp:host:99999",
            "tls:host",
            "tls::1",
            "ftp:x",
            "unix:",
        ] {
            assert!(
                matches!(Url::parse(u), Err(LinkError::BadUrl { .. })),
                "{u}"
            );
        }
    }
}
