//! What files a pipeline's tasks may open: the capability handed to every task factory.
//!
//! A pipeline the user runs in their own process (`offhost run FILE`) sees files as the
//! process does ([`Files::Ambient`]). A pipeline that arrives from outside (submitted to the
//! daemon, written to an NBD action export's control range) gets [`Files::Denied`], or with
//! `--files DIR` [`Files::beneath`]: every path is opened relative to a directory handle with
//! cap-std, whose resolution (`openat2` with `RESOLVE_BENEATH` on Linux, or a walk that checks
//! each component) refuses `..` out of the directory, absolute paths and symlinks that lead
//! out. Nothing here compares path strings; the kernel and the capability decide.
//!
//! Tasks never open a path themselves: their factories ask [`Files`] (through
//! [`Build::files`](crate::Build::files)) while the pipeline is built, so a refusal is an
//! error of the pipeline that names the task, the line and the path before anything runs. A
//! file to read is opened then (in a sandbox; with ambient access it is opened when the task
//! first runs, as before); a file to write is checked then (its directory is opened beneath
//! the root) and created when the task first runs.
//!
//! Beneath a directory a pipeline reads regular files only, unless the engine allows more
//! ([`Files::allow_devices`], `--files-allow-devices`): a character device never ends (a
//! stream of `/dev/zero` read 93 GiB in 4 s), a fifo's open waits for a writer, and a socket
//! or directory is no file's contents. The path is opened without waiting (`O_NONBLOCK`) and
//! what it opened is checked (`fstat`), so nothing swapped in between a check and the open
//! gets through.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use offhost_units::{Needs, Setting};

/// The file access of a pipeline.
#[derive(Clone, Debug, Default)]
pub enum Files {
    /// Paths as the process sees them (the user's own pipeline).
    #[default]
    Ambient,
    /// No file access at all.
    Denied,
    /// Paths resolve beneath one directory.
    Beneath(Arc<Root>),
}

/// The directory a sandboxed pipeline's paths resolve beneath.
#[derive(Debug, Clone)]
pub struct Root {
    dir: Arc<cap_std::fs::Dir>,
    path: PathBuf,
    /// Whether a task may read what is not a regular file (devices, fifos, sockets).
    devices: bool,
}

/// A file access a pipeline asked for and was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The pipeline has no file access.
    #[error("file access refused for {path:?}: pipelines from outside have no file access {}", needs.for_peer())]
    Denied {
        /// The path asked for.
        path: String,
        /// What allows it: the setting `files`. Its words are the server's flag: the refusal
        /// reaches the pipeline's sender, not whoever runs the server.
        #[source]
        needs: Needs,
    },
    /// The path does not resolve beneath the root (or cannot be opened there).
    #[error("file access refused for {path:?} beneath {root}: {source}")]
    Beneath {
        /// The path asked for.
        path: String,
        /// The root.
        root: String,
        /// Why (an escape is `PermissionDenied`: a path led outside).
        source: io::Error,
    },
    /// The file is larger than what it is read for may be.
    #[error("{path:?} has more than the {max} bytes it may have")]
    TooLarge {
        /// The path asked for.
        path: String,
        /// The most it may have.
        max: u64,
    },
    /// The path beneath the root is not a regular file (a device, fifo, socket or
    /// directory), and the engine does not allow reading those.
    #[error("file access refused for {path:?} beneath {root}: it is a {kind}, not a regular file {}", needs.for_peer())]
    NotRegular {
        /// The path asked for.
        path: String,
        /// The root.
        root: String,
        /// What it is: `character device`, `fifo`...
        kind: &'static str,
        /// What allows it: the setting `files_allow_devices`.
        #[source]
        needs: Needs,
    },
}

/// A file a task reads: opened at build time in a sandbox, by path at first run otherwise.
#[derive(Debug)]
pub struct ReadFile {
    path: String,
    opened: Option<std::fs::File>,
}

impl ReadFile {
    /// The path as the pipeline gave it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The open file.
    pub fn open(self) -> io::Result<std::fs::File> {
        match self.opened {
            Some(f) => Ok(f),
            None => std::fs::File::open(&self.path),
        }
    }
}

/// A file a task writes: its place checked at build time, created at first run.
#[derive(Debug)]
pub struct WriteFile {
    path: String,
    /// The directory it goes in and its name there, in a sandbox.
    beneath: Option<(cap_std::fs::Dir, PathBuf)>,
}

impl WriteFile {
    /// The path as the pipeline gave it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Creates (or truncates) the file.
    pub fn create(&self) -> io::Result<std::fs::File> {
        match &self.beneath {
            None => std::fs::File::create(&self.path),
            Some((dir, name)) => dir.create(name).map(cap_std::fs::File::into_std),
        }
    }
}

/// The text `r` holds if it is at most `max` bytes (`None` past that): no more than `max + 1`
/// bytes are read, whatever `r` could give.
pub fn read_text_within(r: impl io::Read, max: u64) -> io::Result<Option<String>> {
    let mut s = String::new();
    io::Read::read_to_string(&mut io::Read::take(r, max.saturating_add(1)), &mut s)?;
    Ok((s.len() as u64 <= max).then_some(s))
}

impl Files {
    /// Access beneath `dir` only, to read regular files (see [`allow_devices`](Self::allow_devices)).
    pub fn beneath(dir: &Path) -> io::Result<Files> {
        let d = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())?;
        Ok(Files::Beneath(Arc::new(Root {
            dir: Arc::new(d),
            path: dir.to_owned(),
            devices: false,
        })))
    }

    /// Beneath a directory: whether tasks may read what is not a regular file (character and
    /// block devices, fifos, sockets); off unless allowed here. No effect on the other kinds
    /// of access.
    pub fn allow_devices(self, allow: bool) -> Files {
        match self {
            Files::Beneath(root) => Files::Beneath(Arc::new(Root {
                devices: allow,
                ..Root::clone(&root)
            })),
            other => other,
        }
    }

    /// Opens `path` beneath `root` for reading: without waiting (a fifo with no writer), and
    /// only a regular file unless the root allows devices.
    fn open_beneath(&self, path: &str, root: &Root) -> Result<std::fs::File, FileError> {
        use cap_std::fs::OpenOptionsExt;
        let mut opts = cap_std::fs::OpenOptions::new();
        // The flag's bits as `open` takes them: an `i32` of the same bits. Without it the
        // open of a fifo waits for a writer, and the pipeline's build with it.
        opts.read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        let f = root
            .dir
            .open_with(path, &opts)
            .map_err(|e| self.refused(path, root, e))?
            .into_std();
        let ft = f
            .metadata()
            .map_err(|e| self.refused(path, root, e))?
            .file_type();
        if !ft.is_file() && !root.devices {
            use std::os::unix::fs::FileTypeExt;
            let kind = if ft.is_char_device() {
                "character device"
            } else if ft.is_block_device() {
                "block device"
            } else if ft.is_fifo() {
                "fifo"
            } else if ft.is_socket() {
                "socket"
            } else if ft.is_dir() {
                "directory"
            } else {
                "special file"
            };
            return Err(FileError::NotRegular {
                needs: Needs::new(Setting::FilesAllowDevices),
                path: path.to_owned(),
                root: root.path.display().to_string(),
                kind,
            });
        }
        // Reads wait again, as after a plain open (a fifo's, where devices are allowed).
        rustix::fs::fcntl_setfl(&f, rustix::fs::OFlags::empty())
            .map_err(|e| self.refused(path, root, e.into()))?;
        Ok(f)
    }

    fn refused(&self, path: &str, root: &Root, source: io::Error) -> FileError {
        FileError::Beneath {
            path: path.to_owned(),
            root: root.path.display().to_string(),
            source,
        }
    }

    /// A file to read at `path`.
    pub fn open(&self, path: &str) -> Result<ReadFile, FileError> {
        match self {
            Files::Ambient => Ok(ReadFile {
                path: path.to_owned(),
                opened: None,
            }),
            Files::Denied => Err(FileError::Denied {
                needs: Needs::new(Setting::Files),
                path: path.to_owned(),
            }),
            Files::Beneath(root) => Ok(ReadFile {
                path: path.to_owned(),
                opened: Some(self.open_beneath(path, root)?),
            }),
        }
    }

    /// A file to write at `path` (created when the task first runs).
    pub fn create(&self, path: &str) -> Result<WriteFile, FileError> {
        match self {
            Files::Ambient => Ok(WriteFile {
                path: path.to_owned(),
                beneath: None,
            }),
            Files::Denied => Err(FileError::Denied {
                needs: Needs::new(Setting::Files),
                path: path.to_owned(),
            }),
            Files::Beneath(root) => {
                let p = Path::new(path);
                let bad_name =
                    || io::Error::new(io::ErrorKind::InvalidInput, "the path names no file");
                let name = p
                    .file_name()
                    .ok_or_else(|| self.refused(path, root, bad_name()))?;
                let dir = match p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    None => root.dir.try_clone(),
                    Some(parent) => root.dir.open_dir(parent),
                }
                .map_err(|e| self.refused(path, root, e))?;
                Ok(WriteFile {
                    path: path.to_owned(),
                    beneath: Some((dir, PathBuf::from(name))),
                })
            }
        }
    }

    /// The whole text of the file at `path` (read now: a header, say), if it has at most
    /// `max` bytes: no more than `max + 1` are read, whatever the file's size.
    pub fn read_to_string(&self, path: &str, max: u64) -> Result<String, FileError> {
        let f = self.open(path)?;
        let io_err = |e| match self {
            Files::Beneath(root) => self.refused(path, root, e),
            _ => FileError::Beneath {
                path: path.to_owned(),
                root: "/".into(),
                source: e,
            },
        };
        let f = f.open().map_err(io_err)?;
        read_text_within(f, max)
            .map_err(io_err)?
            .ok_or_else(|| FileError::TooLarge {
                path: path.to_owned(),
                max,
            })
    }

    /// The names of the entries of the directory at `path` (`""` or `.`: the root, or the
    /// current directory with ambient access).
    pub fn list_dir(&self, path: &str) -> Result<Vec<String>, FileError> {
        let names = |it: &mut dyn Iterator<Item = io::Result<String>>| {
            it.collect::<io::Result<Vec<String>>>()
        };
        match self {
            Files::Denied => Err(FileError::Denied {
                needs: Needs::new(Setting::Files),
                path: path.to_owned(),
            }),
            Files::Ambient => {
                let p = if path.is_empty() { "." } else { path };
                std::fs::read_dir(p)
                    .and_then(|rd| {
                        names(&mut rd.map(|e| e.map(|e| e.file_name().to_string_lossy().into())))
                    })
                    .map_err(|e| FileError::Beneath {
                        path: path.to_owned(),
                        root: "/".into(),
                        source: e,
                    })
            }
            Files::Beneath(root) => {
                let p = if path.is_empty() { "." } else { path };
                root.dir
                    .read_dir(p)
                    .and_then(|rd| {
                        names(&mut rd.map(|e| e.map(|e| e.file_name().to_string_lossy().into())))
                    })
                    .map_err(|e| self.refused(path, root, e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn root() -> (tempfile::TempDir, Files) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("in")).unwrap();
        std::fs::write(d.path().join("in/a.txt"), b"inside").unwrap();
        std::fs::write(d.path().join("secret"), b"outside").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), d.path().join("in/link")).unwrap();
        std::os::unix::fs::symlink("../secret", d.path().join("in/rel")).unwrap();
        let f = Files::beneath(&d.path().join("in")).unwrap();
        (d, f)
    }

    #[test]
    fn paths_beneath_the_root_open_and_escapes_are_refused() {
        let (d, f) = root();
        let mut s = String::new();
        f.open("a.txt")
            .unwrap()
            .open()
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "inside");
        let secret = d.path().join("secret").display().to_string();
        for bad in ["../secret", secret.as_str(), "link", "rel", "/etc/passwd"] {
            let e = f.open(bad).expect_err(bad);
            assert!(e.to_string().contains("refused"), "{bad}: {e}");
            let e = f.create(&format!("{bad}/x")).expect_err(bad);
            assert!(e.to_string().contains("refused"), "{bad}: {e}");
        }
        for bad in ["../new", "/tmp/new-offhost-file"] {
            assert!(f.create(bad).is_err(), "{bad}");
        }
        // Writing through a symlink that leads out is refused when the file is created.
        let w = f.create("link").unwrap();
        assert!(w.create().is_err(), "a symlink out of the root");
        assert_eq!(std::fs::read(d.path().join("secret")).unwrap(), b"outside");
        let w = f.create("out.txt").unwrap();
        w.create().unwrap().write_all(b"new").unwrap();
        assert_eq!(std::fs::read(d.path().join("in/out.txt")).unwrap(), b"new");
        let mut names = f.list_dir("").unwrap();
        names.sort();
        assert_eq!(names, ["a.txt", "link", "out.txt", "rel"]);
        assert!(f.list_dir("..").is_err());
    }

    #[test]
    fn only_regular_files_are_read_beneath_the_root_unless_devices_are_allowed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("plain"), b"bytes").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let fifo = d.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(d.path().join("sock")).unwrap();
        // A character device node (as /dev/zero) inside the directory, where this user may
        // make one (root); the fifo and the socket stand in otherwise.
        let zero = d.path().join("zero");
        let have_dev = rustix::fs::mknodat(
            rustix::fs::CWD,
            &zero,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o600),
            rustix::fs::makedev(1, 5),
        )
        .is_ok();
        let f = Files::beneath(d.path()).unwrap();
        // A socket does not open at all (ENXIO).
        assert!(f.open("sock").is_err());
        let mut kinds = vec![("fifo", "fifo"), ("sub", "directory")];
        if have_dev {
            kinds.push(("zero", "character device"));
        }
        for (name, kind) in &kinds {
            // The open does not wait for a fifo's writer: it is refused at once.
            let e = f.open(name).expect_err(name);
            assert!(matches!(e, FileError::NotRegular { .. }), "{name}: {e}");
            assert!(e.to_string().contains(&format!("it is a {kind}")), "{e}");
            assert!(e.to_string().contains("--files-allow-devices"), "{e}");
            assert!(f.read_to_string(name, 1024).is_err(), "{name}");
        }
        // A text is read only up to its bound, and past it refused, naming the bound.
        std::fs::write(d.path().join("ten"), "0123456789").unwrap();
        assert_eq!(f.read_to_string("ten", 10).unwrap(), "0123456789");
        let e = f.read_to_string("ten", 9).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { max: 9, .. }), "{e}");
        let mut s = String::new();
        f.open("plain")
            .unwrap()
            .open()
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "bytes");
        // Allowed, the fifo opens, without waiting for a writer; then its reads wait for one.
        let allowed = f.allow_devices(true);
        let reader = allowed.open("fifo").unwrap();
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        (&writer).write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        reader.open().unwrap().read_exact(&mut one).unwrap();
        assert_eq!(&one, b"x");
        if have_dev {
            // A node on a filesystem mounted nodev does not open; elsewhere it reads zeros.
            if let Ok(r) = allowed.open("zero") {
                let mut z = [1u8; 4];
                r.open().unwrap().read_exact(&mut z).unwrap();
                assert_eq!(z, [0; 4]);
            }
        }
    }

    #[test]
    fn denied_refuses_everything_and_says_how_to_allow() {
        let e = Files::Denied.open("x").unwrap_err();
        let FileError::Denied { needs, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(needs.setting, Setting::Files);
        // It reaches the pipeline's sender as text: the server's flag.
        assert!(
            e.to_string().contains("offhost engine or nbd --files DIR"),
            "{e}"
        );
        assert!(Files::Denied.create("x").is_err());
        assert!(Files::Denied.list_dir("").is_err());
    }
}
