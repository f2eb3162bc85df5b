//! Addresses of off-host channels: `[PEER/]CHANNEL`.

use offhost_proto::offload::MAX_ADDRESS;
use offhost_proto::peer::{valid_peer_name, MAX_DATA_CHANNEL};

/// Where a channel handle leads.
///
/// | address | sends go to | receives take |
/// |---|---|---|
/// | `CHANNEL` (no `/`) | this node's mailbox `CHANNEL` (hosts of the same engine) | this node's mailbox `CHANNEL` |
/// | `./CHANNEL` | the same; the way to name a local channel with a `/` in it (`./in/3/samples`) | the same |
/// | `PEER/CHANNEL` | mailbox (or pipeline input) `CHANNEL` at the engine named `PEER` in the peer table, or that linked to us | this node's mailbox `CHANNEL` |
/// | `tls:HOST:PORT/CHANNEL`, `tcp:HOST:PORT/CHANNEL` | the same at the engine listening there | this node's mailbox `CHANNEL` |
///
/// So two hosts on engines `alpha` and `recon` talk by opening `recon/pet` and `alpha/pet`
/// respectively; a channel `in/N/NAME` at an engine is `host-in name=NAME` of its pipeline N.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The peer engine, or `None` for this node.
    pub peer: Option<String>,
    /// The channel name.
    pub channel: String,
}

impl Address {
    /// Parses an address; the error says what is wrong.
    pub fn parse(s: &str) -> Result<Address, String> {
        if s.is_empty() || s.len() > MAX_ADDRESS {
            return Err(format!(
                "address of {} bytes: use 1 to {MAX_ADDRESS}",
                s.len()
            ));
        }
        let (peer, channel) = if s.starts_with("tls:") || s.starts_with("tcp:") {
            let (url, ch) = s
                .split_once('/')
                .ok_or_else(|| format!("{s:?}: a URL peer needs /CHANNEL after it"))?;
            crate::Endpoint::parse(url).map_err(|e| e.to_string())?;
            (Some(url.to_owned()), ch)
        } else {
            match s.split_once('/') {
                None => (None, s),
                Some((".", ch)) => (None, ch),
                Some((p, ch)) => {
                    if !valid_peer_name(p) {
                        return Err(format!(
                            "{p:?} is not a peer name (1 to 64 of A-Z a-z 0-9 . _ -); a local channel with a / is ./{s}"
                        ));
                    }
                    (Some(p.to_owned()), ch)
                }
            }
        };
        if channel.is_empty() || channel.len() > MAX_DATA_CHANNEL {
            return Err(format!(
                "{s:?}: the channel name needs 1 to {MAX_DATA_CHANNEL} bytes"
            ));
        }
        Ok(Address {
            peer,
            channel: channel.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        let a = |s| Address::parse(s).unwrap();
        assert_eq!(
            a("pet"),
            Address {
                peer: None,
                channel: "pet".into()
            }
        );
        assert_eq!(
            a("./in/3/x"),
            Address {
                peer: None,
                channel: "in/3/x".into()
            }
        );
        assert_eq!(
            a("recon/in/3/x"),
            Address {
                peer: Some("recon".into()),
                channel: "in/3/x".into()
            }
        );
        assert_eq!(
            a("tls:10.0.0.2:7460/pet"),
            Address {
                peer: Some("tls:10.0.0.2:7460".into()),
                channel: "pet".into()
            }
        );
        for bad in ["", "a/", "tls:x:1", "tls:x/y", "a b/c", &"x".repeat(256)] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
    }
}
