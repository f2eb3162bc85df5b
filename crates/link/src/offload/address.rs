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

/// What is wrong with an address ([`Address::parse`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// Empty, or longer than an address may be.
    #[error("address of {0} bytes: use 1 to {MAX_ADDRESS}")]
    Length(usize),
    /// A `tls:` or `tcp:` peer with no `/CHANNEL` after it.
    #[error("{0:?}: a URL peer needs /CHANNEL after it")]
    NoChannel(String),
    /// The peer's URL does not parse.
    #[error("{0}")]
    Url(#[source] crate::LinkError),
    /// The part before the `/` is no peer name.
    #[error("{peer:?} is not a peer name (1 to 64 of A-Z a-z 0-9 . _ -); a local channel with a / is ./{address}")]
    PeerName {
        /// The part before the `/`.
        peer: String,
        /// The whole address.
        address: String,
    },
    /// The channel name is empty or too long.
    #[error("{0:?}: the channel name needs 1 to {MAX_DATA_CHANNEL} bytes")]
    ChannelName(String),
}

impl Address {
    /// Parses an address; the error says what is wrong.
    pub fn parse(s: &str) -> Result<Address, AddressError> {
        if s.is_empty() || s.len() > MAX_ADDRESS {
            return Err(AddressError::Length(s.len()));
        }
        let (peer, channel) = if s.starts_with("tls:") || s.starts_with("tcp:") {
            let (url, ch) = s
                .split_once('/')
                .ok_or_else(|| AddressError::NoChannel(s.to_owned()))?;
            crate::Url::parse(url).map_err(AddressError::Url)?;
            (Some(url.to_owned()), ch)
        } else {
            match s.split_once('/') {
                None => (None, s),
                Some((".", ch)) => (None, ch),
                Some((p, ch)) => {
                    if !valid_peer_name(p) {
                        return Err(AddressError::PeerName {
                            peer: p.to_owned(),
                            address: s.to_owned(),
                        });
                    }
                    (Some(p.to_owned()), ch)
                }
            }
        };
        if channel.is_empty() || channel.len() > MAX_DATA_CHANNEL {
            return Err(AddressError::ChannelName(s.to_owned()));
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
        assert!(matches!(
            Address::parse("bad peer/x"),
            Err(AddressError::PeerName { .. })
        ));
        assert!(matches!(Address::parse(""), Err(AddressError::Length(0))));
        assert!(matches!(
            Address::parse("tcp:h:1"),
            Err(AddressError::NoChannel(_))
        ));
    }
}
