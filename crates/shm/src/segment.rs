//! The segment itself: a sealed, owner-only memfd mapped shared into each process.
//!
//! A memfd has no name in any file system, so nothing is left behind when the processes that
//! hold it exit, however they exit. The creator seals it against shrinking and growing, so a
//! peer cannot truncate it under us (which would turn our next access into SIGBUS).

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use std::mem::size_of;
use std::ptr::NonNull;

use crate::config::Config;
use crate::error::{AttachError, ShmError};
use crate::layout::{Control, Header, Layout};

/// A shared mapping of a whole segment.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access through it goes through atomics or
// through ranges whose exclusive use is arbitrated by the ring and pool protocols.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only hands out atomics and raw pointers.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn map(fd: BorrowedFd<'_>, len: usize) -> Result<Mapping, AttachError> {
        // SAFETY: a fresh mapping at an address the kernel chooses cannot alias any Rust object;
        // `len` is the file's size (sealed against shrinking), so every page is backed.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .map_err(|e| AttachError::Io {
            op: "mmap",
            source: e.into(),
        })?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(AttachError::Io {
            op: "mmap",
            source: std::io::Error::other("null mapping"),
        })?;
        Ok(Mapping { ptr, len })
    }

    /// The control block at offset 0.
    pub(crate) fn control(&self) -> &Control {
        assert!(self.len >= size_of::<Control>());
        // SAFETY: the mapping is page aligned and at least `size_of::<Control>()` long (checked
        // above and at attach); `Control` holds only atomics and a header that we read with
        // `read_volatile` only, so shared mutation by the peer is not a data race on it.
        unsafe { &*self.ptr.as_ptr().cast::<Control>() }
    }

    /// A raw pointer to `len` bytes at `off`, after checking the range lies in the mapping.
    pub(crate) fn range(&self, off: u64, len: u64) -> *mut u8 {
        let end = off.checked_add(len).expect("range overflow");
        assert!(end <= self.len as u64, "range {off}+{len} outside segment");
        // SAFETY: `off + len <= self.len`, so the pointer stays inside the mapping.
        unsafe { self.ptr.as_ptr().add(off as usize) }
    }

    fn read_header(&self) -> Header {
        // SAFETY: the header lies at offset 0 of a mapping at least `size_of::<Control>()` long
        // and is plain old data; a volatile copy is the only access, so a peer changing it
        // concurrently cannot make us read anything but some bit pattern.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().cast::<Header>()) }
    }

    fn write_header(&self, h: Header) {
        // SAFETY: as in `read_header`; the segment is not shared yet while the creator writes it.
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().cast::<Header>(), h) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap, and nothing borrowed from the mapping
        // outlives it (all borrows go through `&self`, and owners hold an `Arc` to it).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A mapped segment with its layout and the memfd that backs it.
pub(crate) struct Segment {
    pub fd: OwnedFd,
    pub map: Mapping,
    pub layout: Layout,
    pub header: Header,
}

/// Creates a new zero-filled, sealed, owner-only segment for `config`.
pub(crate) fn create(config: &Config) -> Result<Segment, ShmError> {
    let layout = Layout::new(config)?;
    let fd = rustix::fs::memfd_create(
        "offhost-segment",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .map_err(ShmError::io("memfd_create"))?;
    rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))
        .map_err(ShmError::io("fchmod"))?;
    rustix::fs::ftruncate(&fd, layout.total).map_err(ShmError::io("ftruncate"))?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .map_err(ShmError::io("fcntl(F_ADD_SEALS)"))?;
    let map = Mapping::map(fd.as_fd(), layout.total as usize)?;
    let header = layout.header(config);
    map.write_header(header);
    Ok(Segment {
        fd,
        map,
        layout,
        header,
    })
}

/// Validates and maps a segment handed over by a peer.
pub(crate) fn attach(fd: OwnedFd) -> Result<Segment, AttachError> {
    let io = |op| {
        move |e: rustix::io::Errno| AttachError::Io {
            op,
            source: e.into(),
        }
    };
    let size = rustix::fs::fstat(&fd).map_err(io("fstat"))?.st_size as u64;
    let needed = size_of::<Control>() as u64;
    if size < needed {
        return Err(AttachError::TooSmall {
            found: size,
            needed,
        });
    }
    let seals = rustix::fs::fcntl_get_seals(&fd).map_err(io("fcntl(F_GET_SEALS)"))?;
    if !seals.contains(SealFlags::SHRINK) {
        return Err(AttachError::NotSealed);
    }
    let map = Mapping::map(fd.as_fd(), size as usize)?;
    let header = map.read_header();
    let layout = Layout::validate(&header, size)?;
    Ok(Segment {
        fd,
        map,
        layout,
        header,
    })
}
