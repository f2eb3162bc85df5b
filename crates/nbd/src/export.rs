//! Exports and their specifications: `NAME=KIND:ARG[,OPTION[=VALUE]]...`.
//!
//! Kinds:
//! - `mem:SIZE` — sparse memory disk. SIZE takes K, M, G, T suffixes (powers of 1024).
//! - `actions:FILE.ion` — a pipeline as a disk ([`crate::actions`]); options
//!   `underrun=wait|poll` (what the plain data range does when nothing is ready, default
//!   wait), `wait=DURATION` (longest a waiting read waits, default 30s), `channels=N` (host
//!   channel regions, default 8).
//!
//! Options for every kind: `readonly` (or `ro`), `block=N` (minimum block size: a power of
//! two from 1 to 65536; requests not aligned to it get `EINVAL`), `max=SIZE` (largest read or
//! write payload, default 32M), `desc=TEXT` (description shown by `NBD_OPT_LIST`/`INFO`).
//! Options for `mem` that turn on the drive model ([`crate::drive`]): `rpm=N`, `seek=DURATION`
//! (average seek, e.g. `8ms`, `500us`), `rate=SIZE` (media bytes per second, e.g. `40M`),
//! `spt=N` (sectors per track), `tpc=N` (tracks per cylinder), `cache=none|read-ahead|write-behind`.

use std::sync::Arc;
use std::time::Duration;

use offhost_engine::{Files, Registry};

use crate::actions::{ActionDisk, ActionsError, Underrun};
use crate::backend::Backend;
use crate::drive::{Cache, DriveParams, ModelledDisk};
use crate::mem::{MemDisk, MAX_SIZE};

/// Default largest payload of a single read or write.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32 << 20;
/// Preferred block size advertised to clients.
pub const PREFERRED_BLOCK: u32 = 4096;

/// Why an export specification was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// No `=` between the name and the kind.
    #[error("export `{0}`: expected NAME=KIND:ARG[,OPTION...]")]
    NoName(String),
    /// The kind is not one this server knows.
    #[error("export `{name}`: unknown kind `{kind}` (known: mem, actions)")]
    UnknownKind {
        /// Export name.
        name: String,
        /// Kind given.
        kind: String,
    },
    /// An option is not known for this kind.
    #[error("export `{name}`: unknown option `{option}`")]
    UnknownOption {
        /// Export name.
        name: String,
        /// Option given.
        option: String,
    },
    /// A value could not be parsed or is out of range.
    #[error("export `{name}`: bad value for `{what}`: {why}")]
    BadValue {
        /// Export name.
        name: String,
        /// Which field.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// A size or a duration that [`offhost_units`] cannot read.
    #[error("export `{name}`: bad value for `{what}`: {source}")]
    BadUnit {
        /// Export name.
        name: String,
        /// Which field.
        what: String,
        /// What is wrong with the text.
        #[source]
        source: offhost_units::UnitError,
    },
    /// An `actions:` export's pipeline file cannot be read, or its pipeline is rejected.
    #[error("export `{name}`: {source}")]
    Actions {
        /// Export name.
        name: String,
        /// What is wrong with the pipeline.
        #[source]
        source: ActionsError,
    },
    /// Two exports share a name.
    #[error("export `{0}` is declared twice")]
    Duplicate(String),
}

/// One named export.
pub struct Export {
    /// Name clients ask for.
    pub name: String,
    /// Human-readable description.
    pub description: String,
    /// The storage.
    pub backend: Arc<dyn Backend>,
    /// Writes are refused with `EPERM`.
    pub readonly: bool,
    /// Minimum block size (alignment of every request).
    pub min_block: u32,
    /// Largest read or write payload.
    pub max_payload: u32,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("name", &self.name)
            .field("size", &self.backend.size())
            .field("readonly", &self.readonly)
            .field("min_block", &self.min_block)
            .field("max_payload", &self.max_payload)
            .finish()
    }
}

/// The longest `wait=` and `seek=` take.
const MAX_DURATION: Duration = Duration::from_secs(3600);

impl Export {
    /// Parses `NAME=KIND:ARG[,OPTION...]` and builds the export.
    pub fn from_spec(spec: &str) -> Result<Self, SpecError> {
        Self::from_spec_with(spec, None)
    }

    /// Like [`from_spec`](Self::from_spec); an `actions:` export accepts pipelines written to
    /// its control range when `control` is given, built with that file access
    /// ([`ActionDisk::set_control`]).
    pub fn from_spec_with(spec: &str, control: Option<Files>) -> Result<Self, SpecError> {
        let (name, rest) = spec
            .split_once('=')
            .ok_or_else(|| SpecError::NoName(spec.to_owned()))?;
        let name = name.to_owned();
        if name.len() > 4096 || name.contains('\0') {
            return Err(SpecError::BadValue {
                name,
                what: "name".into(),
                why: "longer than 4096 bytes or holds NUL".into(),
            });
        }
        let mut parts = rest.split(',');
        let head = parts.next().unwrap_or_default();
        let (kind, arg) = head.split_once(':').unwrap_or((head, ""));
        let bad = |what: &str, why: String| SpecError::BadValue {
            name: name.clone(),
            what: what.to_owned(),
            why,
        };
        // A size ([`offhost_units::parse_size`]).
        let size_of = |what: &str, v: &str| {
            offhost_units::parse_size(v).map_err(|source| SpecError::BadUnit {
                name: name.clone(),
                what: what.to_owned(),
                source,
            })
        };
        // A duration, at most an hour ([`offhost_units::parse_duration`]).
        let duration_of = |what: &str, v: &str| {
            let d = offhost_units::parse_duration(v).map_err(|source| SpecError::BadUnit {
                name: name.clone(),
                what: what.to_owned(),
                source,
            })?;
            if d > MAX_DURATION {
                return Err(bad(what, format!("`{v}` is out of range (0 to 1h)")));
            }
            Ok(d)
        };
        let is_actions = match kind {
            "mem" => false,
            "actions" => true,
            _ => {
                return Err(SpecError::UnknownKind {
                    name,
                    kind: kind.to_owned(),
                })
            }
        };
        let size = if is_actions {
            0
        } else {
            let size = size_of("size", arg)?;
            if size == 0 || size > MAX_SIZE {
                return Err(bad("size", format!("must be 1 byte to 64T, got {size}")));
            }
            size
        };
        let mut underrun = Underrun::Wait;
        let mut wait_limit = Duration::from_secs(30);
        let mut channels = 8usize;
        let mut readonly = false;
        let mut min_block = 1u32;
        let mut max_payload = DEFAULT_MAX_PAYLOAD;
        let mut description = if is_actions {
            format!("offhost action disk, pipeline {arg}")
        } else {
            format!("offhost memory disk, {arg}")
        };
        let mut drive = DriveParams::default();
        let mut modelled = false;
        for opt in parts {
            let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
            let num = |v: &str| -> Result<u64, SpecError> {
                v.parse::<u64>()
                    .map_err(|_| bad(k, format!("`{v}` is not a whole number")))
            };
            match k {
                "readonly" | "ro" => readonly = true,
                "block" => {
                    let b = size_of(k, v)?;
                    if !b.is_power_of_two() || b > 65536 {
                        return Err(bad(k, format!("{b} is not a power of two up to 65536")));
                    }
                    min_block = b as u32;
                }
                "max" => {
                    let m = size_of(k, v)?;
                    if !(512..=(1 << 30)).contains(&m) {
                        return Err(bad(k, format!("{m} is outside 512 to 1G")));
                    }
                    max_payload = m as u32;
                }
                "desc" => description = v.to_owned(),
                "underrun" if is_actions => {
                    underrun = match v {
                        "wait" => Underrun::Wait,
                        "poll" => Underrun::Poll,
                        _ => return Err(bad(k, format!("`{v}` is not wait or poll"))),
                    }
                }
                "wait" if is_actions => {
                    wait_limit = duration_of(k, v)?;
                }
                "channels" if is_actions => {
                    let n = num(v)?;
                    if !(1..=1024).contains(&n) {
                        return Err(bad(k, format!("{n} is outside 1 to 1024")));
                    }
                    channels = n as usize;
                }
                "rpm" | "seek" | "rate" | "spt" | "tpc" | "cache" if is_actions => {
                    return Err(bad(
                        k,
                        "drive model options apply to mem exports only".into(),
                    ))
                }
                "rpm" => {
                    drive.rpm = num(v)? as f64;
                    modelled = true;
                }
                "seek" => {
                    drive.seek = duration_of(k, v)?;
                    modelled = true;
                }
                "rate" => {
                    drive.rate = size_of(k, v)? as f64;
                    modelled = true;
                }
                "spt" | "tpc" => {
                    let n = num(v)?;
                    if n == 0 || n > 1 << 20 {
                        return Err(bad(k, format!("{n} is outside 1 to 1048576")));
                    }
                    if k == "spt" {
                        drive.sectors_per_track = n;
                    } else {
                        drive.tracks_per_cylinder = n;
                    }
                    modelled = true;
                }
                "cache" => {
                    drive.cache = match v {
                        "none" => Cache::None,
                        "read-ahead" => Cache::ReadAhead,
                        "write-behind" => Cache::WriteBehind,
                        _ => {
                            return Err(bad(
                                k,
                                format!("`{v}` is not none, read-ahead or write-behind"),
                            ))
                        }
                    };
                    modelled = true;
                }
                _ => {
                    return Err(SpecError::UnknownOption {
                        name,
                        option: opt.to_owned(),
                    })
                }
            }
        }
        if max_payload < min_block {
            return Err(bad("max", "smaller than the block size".into()));
        }
        let backend: Arc<dyn Backend> = if is_actions {
            let actions = |source| SpecError::Actions {
                name: name.clone(),
                source,
            };
            let text = std::fs::read_to_string(arg).map_err(|source| {
                actions(ActionsError::Read {
                    path: arg.to_owned(),
                    source,
                })
            })?;
            let mut disk = ActionDisk::new(
                &text,
                Arc::new(Registry::with_builtins()),
                channels,
                underrun,
                wait_limit,
            )
            .map_err(actions)?;
            disk.set_control(control);
            Arc::new(disk)
        } else if modelled {
            Arc::new(ModelledDisk::new(size, drive))
        } else {
            Arc::new(MemDisk::new(size))
        };
        Ok(Self {
            name,
            description,
            backend,
            readonly,
            min_block,
            max_payload,
        })
    }

    /// Builds an export around an existing backend (tests, embedding).
    pub fn new(name: &str, backend: Arc<dyn Backend>) -> Self {
        Self {
            name: name.to_owned(),
            description: String::new(),
            backend,
            readonly: false,
            min_block: 1,
            max_payload: DEFAULT_MAX_PAYLOAD,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        let size = |arg: &str| Export::from_spec(&format!("d=mem:{arg}")).map(|e| e.backend.size());
        assert_eq!(size("1G").unwrap(), 1 << 30);
        assert_eq!(size("64KiB").unwrap(), 64 << 10);
        assert_eq!(size("4096").unwrap(), 4096);
        for bad in ["1Q", "99999999999T"] {
            assert!(
                matches!(
                    size(bad),
                    Err(SpecError::BadUnit { ref what, source: offhost_units::UnitError::Size { .. }, .. })
                        if what == "size"
                ),
                "{bad}"
            );
        }
        let seek = |v: &str| Export::from_spec(&format!("d=mem:1G,seek={v}"));
        assert!(seek("8ms").is_ok());
        assert!(matches!(
            seek("8"),
            Err(SpecError::BadUnit {
                source: offhost_units::UnitError::Duration { .. },
                ..
            })
        ));
        assert!(matches!(
            seek("2h"),
            Err(SpecError::BadValue { ref what, ref why, .. })
                if what == "seek" && why.contains("out of range")
        ));
    }

    #[test]
    fn spec_with_options() {
        let e = Export::from_spec("disk=mem:1G,readonly,block=512").unwrap();
        assert_eq!(e.name, "disk");
        assert_eq!(e.backend.size(), 1 << 30);
        assert!(e.readonly);
        assert_eq!(e.min_block, 512);
        assert!(!e.backend.may_block());
        let m = Export::from_spec("slow=mem:1G,rpm=7200,seek=8ms,cache=read-ahead").unwrap();
        assert!(m.backend.may_block() && m.backend.rotational());
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let e = Export::from_spec("disk=mem:1G,fast").unwrap_err();
        assert_eq!(e.to_string(), "export `disk`: unknown option `fast`");
        assert!(matches!(
            Export::from_spec("disk=tape:1G"),
            Err(SpecError::UnknownKind { .. })
        ));
        assert!(matches!(
            Export::from_spec("mem:1G"),
            Err(SpecError::NoName(_))
        ));
        assert!(Export::from_spec("d=mem:1G,block=3").is_err());
        assert!(Export::from_spec("d=mem:0").is_err());
        assert!(Export::from_spec("d=mem:1G,cache=lots").is_err());
        assert!(matches!(
            Export::from_spec("d=actions:/nonexistent/x.ion"),
            Err(SpecError::Actions {
                source: ActionsError::Read { .. },
                ..
            })
        ));
    }
}
