//! "Refused unless allowed", said the same way by every layer, in no front end's words.
//!
//! Some things are refused by default and allowed by a setting of whoever serves or connects:
//! file access for pipelines from outside, plain tcp, a peer of another uid. An error that
//! refuses one carries a [`Needs`] as its [`source`](std::error::Error::source): which
//! [`Setting`] would have allowed it, by a stable id. Its message says what the setting does
//! and names it by that id ("allow plain tcp (the setting insecure)"); how to set it is the front end's to say (the `offhost` command
//! line: [`Setting::flag`]), as for limits ([`crate::limit`]). [`crate::explain`] finds it
//! however deep it was wrapped.
//!
//! Text that crosses a connection (a refusal a server sends its client) adds the `offhost`
//! command and flag of the server with [`Needs::for_peer`].

use std::fmt;

macro_rules! settings {
    ($($(#[$doc:meta])* $v:ident = $id:literal, $flag:literal, $side:literal, [$($cmd:literal),*];)*) => {
        /// A setting that allows what is refused by default, named the same everywhere.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Setting {
            $($(#[$doc])* $v,)*
        }

        impl Setting {
            /// Every setting.
            pub const ALL: &'static [Setting] = &[$(Setting::$v,)*];

            /// The stable identifier: snake_case, the same in every message and front end
            /// (`"files"`).
            pub fn id(self) -> &'static str {
                match self { $(Setting::$v => $id,)* }
            }

            /// The `offhost` command line's flag for it, with its value's name
            /// (`"--files DIR"`).
            pub fn flag(self) -> &'static str {
                match self { $(Setting::$v => $flag,)* }
            }

            /// Whose setting it is, as a client of that server would say it (`"engine"`).
            pub fn side(self) -> &'static str {
                match self { $(Setting::$v => $side,)* }
            }

            /// The `offhost` subcommands that take its flag.
            pub fn commands(self) -> &'static [&'static str] {
                match self { $(Setting::$v => &[$($cmd),*],)* }
            }
        }
    };
}

settings! {
    /// A directory beneath which pipelines from outside may open files (`Files::beneath`).
    Files = "files", "--files DIR", "server", ["engine", "nbd"];
    /// Devices, fifos and sockets beneath that directory too (`Root::allow_devices`).
    FilesAllowDevices = "files_allow_devices", "--files-allow-devices", "server", ["engine", "nbd"];
    /// Plain tcp, without authentication or encryption (`LinkOptions::insecure`).
    Insecure = "insecure", "--insecure", "server", ["engine", "echo", "nbd", "run"];
    /// The certificate directory of `tls:` (`LinkOptions::tls_certificates`).
    TlsCertificates = "tls_certificates", "--tls-certificates DIR", "server",
        ["engine", "echo", "nbd", "submit", "send", "recv", "cat", "run"];
    /// Peers of another uid on unix: and shm: sockets (`LinkOptions::allow_uids`).
    AllowUid = "allow_uid", "--allow-uid UID", "server", ["engine", "echo", "nbd"];
}

impl Setting {
    /// Whether `offhost COMMAND` takes this setting's flag.
    pub fn takes(self, command: &str) -> bool {
        self.commands().contains(&command)
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// The `offhost` subcommands that serve peers.
const SERVERS: [&str; 3] = ["engine", "echo", "nbd"];

/// What would have allowed a refusal: the source of an error that refuses something a
/// [`Setting`] allows, "the setting files". The error's own message says what the setting
/// does, and names it with this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("the setting {setting}")]
pub struct Needs {
    /// The setting.
    pub setting: Setting,
}

impl Needs {
    /// A refusal that `setting` would have allowed.
    pub fn new(setting: Setting) -> Needs {
        Needs { setting }
    }

    /// The first [`Needs`] in `e`'s chain of sources, `e` included.
    pub fn find<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Needs> {
        let mut at = Some(e);
        while let Some(e) = at {
            if let Some(n) = e.downcast_ref::<Needs>() {
                return Some(n);
            }
            at = e.source();
        }
        None
    }

    /// The words a server adds when it sends this to a client as text, which the client
    /// cannot match by type: the `offhost` servers and flag that set it. "(the server allows
    /// it with offhost engine or nbd --files DIR)".
    pub fn for_peer(&self) -> String {
        let s = self.setting;
        let servers: Vec<&str> = (s.commands().iter())
            .copied()
            .filter(|c| SERVERS.contains(c))
            .collect();
        let cmds = crate::limit::one_of(&servers);
        format!(
            "(the {} allows it with offhost {cmds} {})",
            s.side(),
            s.flag()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_snake_case_and_flags_are_the_ids_in_kebab_case() {
        let mut ids: Vec<_> = Setting::ALL.iter().map(|s| s.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), Setting::ALL.len());
        for s in Setting::ALL {
            assert!(s.id().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
            let flag = s.flag().split(' ').next().unwrap();
            assert_eq!(flag, format!("--{}", s.id().replace('_', "-")), "{s:?}");
            assert!(!s.commands().is_empty());
        }
    }

    #[test]
    fn a_refusal_names_the_setting_by_id_and_a_peer_hears_the_flag() {
        let n = Needs::new(Setting::Files);
        assert_eq!(n.to_string(), "the setting files");
        assert_eq!(
            n.for_peer(),
            "(the server allows it with offhost engine or nbd --files DIR)"
        );
        assert!(Setting::Insecure.takes("nbd") && !Setting::Insecure.takes("submit"));
    }
}
