//! Where the two "machines" of the offload bench live: two network namespaces joined by a veth
//! pair (root and iproute2 needed), or this machine's loopback.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// Which network joins the two engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Two network namespaces joined by a veth pair.
    Netns,
    /// 127.0.0.1.
    Loopback,
}

/// A network name that names no network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown network {0:?}: netns or loopback")]
pub struct UnknownNetwork(pub String);

impl std::str::FromStr for Network {
    type Err = UnknownNetwork;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownNetwork> {
        match s {
            "netns" => Ok(Network::Netns),
            "loopback" => Ok(Network::Loopback),
            o => Err(UnknownNetwork(o.to_owned())),
        }
    }
}

/// Why the network asked for cannot be made here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// A command that makes it could not be started (no iproute2).
    #[error("{command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// A command that makes it failed (not root, say).
    #[error("{command}: {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// What it wrote to its standard error.
        stderr: String,
    },
    /// `tc netem` failed on the veth pair.
    #[error("{0} (this kernel may have no netem: run without --netem)")]
    Netem(#[source] Box<NetError>),
    /// `--netem` with `--network loopback`.
    #[error("--netem needs --network netns (loopback is not impaired)")]
    NetemOnLoopback,
}

/// The network made for a run; the namespaces (and the veth pair with them) are deleted when
/// it is dropped.
#[derive(Debug)]
pub struct Net {
    /// What it is.
    pub kind: Network,
    namespaces: Option<(String, String)>,
    /// Side A's address.
    pub addr_a: String,
    /// Engine B's address (where A's side connects).
    pub addr_b: String,
    /// What was done to the link (`tc netem` arguments), if anything.
    pub impairment: Option<String>,
}

fn run(args: &[&str]) -> std::result::Result<(), NetError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetError::Spawn {
            command: args.join(" "),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetError::Failed {
            command: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

impl Net {
    /// Two namespaces joined by a veth pair (10.232.0.1 and .2), `netem` (tc netem arguments,
    /// e.g. `delay 1ms loss 0.1%`) on both ends if given; `None` when namespaces cannot be
    /// made here (not root, no iproute2), with the reason.
    pub fn netns(netem: Option<&str>) -> std::result::Result<Net, NetError> {
        remove_stale();
        let tag = std::process::id() % 100_000;
        let (a, b) = (format!("ohbench{tag}a"), format!("ohbench{tag}b"));
        let (va, vb) = (format!("vob{tag}a"), format!("vob{tag}b"));
        let mut net = Net {
            kind: Network::Netns,
            namespaces: None,
            addr_a: "10.232.0.1".into(),
            addr_b: "10.232.0.2".into(),
            impairment: None,
        };
        let steps: [&[&str]; 2] = [&["ip", "netns", "add", &a], &["ip", "netns", "add", &b]];
        for s in steps {
            run(s)?;
        }
        net.namespaces = Some((a.clone(), b.clone()));
        let steps: [&[&str]; 9] = [
            &[
                "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
            ],
            &["ip", "link", "set", &va, "netns", &a],
            &["ip", "link", "set", &vb, "netns", &b],
            &["ip", "-n", &a, "addr", "add", "10.232.0.1/24", "dev", &va],
            &["ip", "-n", &b, "addr", "add", "10.232.0.2/24", "dev", &vb],
            &["ip", "-n", &a, "link", "set", &va, "up"],
            &["ip", "-n", &b, "link", "set", &vb, "up"],
            &["ip", "-n", &a, "link", "set", "lo", "up"],
            &["ip", "-n", &b, "link", "set", "lo", "up"],
        ];
        for s in steps {
            run(s)?;
        }
        if let Some(args) = netem {
            for (ns, dev) in [(&a, &va), (&b, &vb)] {
                let mut cmd = vec!["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev];
                cmd.extend(["root", "netem"]);
                cmd.extend(args.split_whitespace());
                run(&cmd).map_err(|e| NetError::Netem(Box::new(e)))?;
            }
            net.impairment = Some(format!("netem {args}, both ways"));
        }
        Ok(net)
    }

    /// This machine's loopback.
    pub fn loopback() -> Net {
        Net {
            kind: Network::Loopback,
            namespaces: None,
            addr_a: "127.0.0.1".into(),
            addr_b: "127.0.0.1".into(),
            impairment: None,
        }
    }

    /// The network `network` asks for, made here, with `netem` on it; with no choice,
    /// namespaces where they can be made and loopback otherwise, with a note saying why.
    pub fn choose(
        network: Option<Network>,
        netem: Option<&str>,
    ) -> std::result::Result<(Net, Option<String>), NetError> {
        match network {
            Some(Network::Loopback) if netem.is_some() => Err(NetError::NetemOnLoopback),
            Some(Network::Loopback) => Ok((Net::loopback(), None)),
            Some(Network::Netns) => Ok((Net::netns(netem)?, None)),
            None => match Net::netns(netem) {
                Ok(n) => Ok((n, None)),
                Err(why) if netem.is_none() => Ok((
                    Net::loopback(),
                    Some(format!("no network namespaces ({why}): loopback")),
                )),
                Err(why) => Err(why),
            },
        }
    }

    /// Runs `f` on a thread of this process inside side A's namespace (`a`) or B's, and
    /// returns what it returns; on loopback, on this thread. A socket belongs to the
    /// namespace it was made in, whichever thread uses it later: make there what must
    /// listen or connect on that side.
    pub fn on_side<T: Send>(&self, a: bool, f: impl FnOnce() -> T + Send) -> Result<T> {
        let Some((na, nb)) = &self.namespaces else {
            return Ok(f());
        };
        let name = if a { na } else { nb };
        let path = format!("/run/netns/{name}");
        let ns = std::fs::File::open(&path).map_err(|e| Error::Peer(format!("{path}: {e}")))?;
        std::thread::scope(|s| {
            s.spawn(|| {
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&ns),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .map_err(|e| Error::Peer(format!("entering network namespace {name}: {e}")))?;
                Ok(f())
            })
            .join()
            .map_err(|_| Error::Peer(format!("a thread in network namespace {name} panicked")))?
        })
    }

    /// Side A's address (`a`) or B's.
    pub fn addr_of(&self, a: bool) -> &str {
        if a {
            &self.addr_a
        } else {
            &self.addr_b
        }
    }

    /// The command prefix that runs a program on side A (`a`) or B.
    pub fn prefix(&self, a: bool) -> Vec<String> {
        match &self.namespaces {
            Some((na, nb)) => vec![
                "ip".into(),
                "netns".into(),
                "exec".into(),
                if a { na.clone() } else { nb.clone() },
            ],
            None => Vec::new(),
        }
    }
}

/// Deletes the namespaces of earlier runs whose process is gone (killed before it could clean
/// up), recognised by their name `ohbench{pid}{a|b}`.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix("ohbench")
            .and_then(|r| r.strip_suffix(['a', 'b']))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() % 100_000 && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some((a, b)) = &self.namespaces {
            for ns in [a, b] {
                let _ = Command::new("ip")
                    .args(["netns", "del", ns])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}
