//! A drive model for the memory pseudo-disk: rotational latency, head positioning, transfer
//! rate, geometry and an on-drive cache strategy, so a host's behaviour can be studied against
//! disks that do not exist (`[ION]`, section 7).
//!
//! The model has one actuator: requests are serviced one after another in arrival order. Each
//! request's mechanical time is
//! `seek(cylinder distance) + rotational wait to the first sector + length / rate`, where
//! `seek(d) = seek_avg * sqrt(d / (cylinders / 3))` (a random seek travels a third of the
//! stroke on average, so that is where the model takes `seek_avg`) and the platter angle
//! follows the wall clock. The cache strategies:
//! - `none`: every request pays the mechanical time;
//! - `read-ahead`: after a read, the drive keeps the rest of the track and the next track; a
//!   read wholly inside that range pays only `length / rate`;
//! - `write-behind`: a write is acknowledged once it is in the cache (`length / rate`) and the
//!   mechanism catches up in the background; FUA writes and flushes wait for the mechanism.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::mem::MemDisk;
use crate::proto::Errno;

/// Bytes per sector.
pub const SECTOR: u64 = 512;

/// Cache strategy of a modelled drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    /// No cache.
    None,
    /// Keep the rest of the track and the next one after each read.
    ReadAhead,
    /// Acknowledge writes from the cache.
    WriteBehind,
}

/// Parameters of a modelled drive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriveParams {
    /// Spindle speed in revolutions per minute (0 = no rotational latency).
    pub rpm: f64,
    /// Average seek time.
    pub seek: Duration,
    /// Media transfer rate in bytes per second (0 = infinite).
    pub rate: f64,
    /// Sectors per track.
    pub sectors_per_track: u64,
    /// Tracks per cylinder (heads).
    pub tracks_per_cylinder: u64,
    /// Cache strategy.
    pub cache: Cache,
}

impl Default for DriveParams {
    fn default() -> Self {
        Self {
            rpm: 0.0,
            seek: Duration::ZERO,
            rate: 0.0,
            sectors_per_track: 63,
            tracks_per_cylinder: 16,
            cache: Cache::None,
        }
    }
}

#[derive(Debug)]
struct State {
    busy_until: Instant,
    cylinder: u64,
    read_ahead: Option<(u64, u64)>,
}

/// Kind of access, as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Data leaves the drive.
    Read,
    /// Data goes to the drive.
    Write,
}

/// The timing model (no data): computes when each request may be answered.
#[derive(Debug)]
pub struct DriveModel {
    p: DriveParams,
    cylinders: u64,
    epoch: Instant,
    state: Mutex<State>,
}

impl DriveModel {
    /// A model for a disk of `size` bytes.
    pub fn new(p: DriveParams, size: u64) -> Self {
        let per_cyl = (p.sectors_per_track * p.tracks_per_cylinder).max(1) * SECTOR;
        let now = Instant::now();
        Self {
            p,
            cylinders: size.div_ceil(per_cyl).max(1),
            epoch: now,
            state: Mutex::new(State {
                busy_until: now,
                cylinder: 0,
                read_ahead: None,
            }),
        }
    }

    fn transfer(&self, len: u64) -> Duration {
        if self.p.rate > 0.0 {
            Duration::from_secs_f64(len as f64 / self.p.rate)
        } else {
            Duration::ZERO
        }
    }

    fn seek(&self, dist: u64) -> Duration {
        if dist == 0 {
            return Duration::ZERO;
        }
        let third = (self.cylinders as f64 / 3.0).max(1.0);
        self.p.seek.mul_f64((dist as f64 / third).sqrt())
    }

    fn rotational_wait(&self, at: Instant, sector_in_track: u64) -> Duration {
        if self.p.rpm <= 0.0 {
            return Duration::ZERO;
        }
        let period = 60.0 / self.p.rpm;
        let head = (at.duration_since(self.epoch).as_secs_f64() / period).fract();
        let target = sector_in_track as f64 / self.p.sectors_per_track.max(1) as f64;
        Duration::from_secs_f64((target - head).rem_euclid(1.0) * period)
    }

    /// Books a request on the drive and returns the instant its reply may be sent.
    pub fn book(&self, access: Access, off: u64, len: u64, fua: bool) -> Instant {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let start = st.busy_until.max(now);
        let xfer = self.transfer(len);
        let spt = self.p.sectors_per_track.max(1);
        let track_bytes = spt * SECTOR;
        if access == Access::Read && self.p.cache == Cache::ReadAhead {
            if let Some((a, b)) = st.read_ahead {
                if off >= a && off + len <= b {
                    // Served from the drive's buffer: no mechanical time, the actuator is free.
                    return now + xfer;
                }
            }
        }
        let lba = off / SECTOR;
        let cylinder = lba / spt / self.p.tracks_per_cylinder.max(1);
        let positioned = start + self.seek(cylinder.abs_diff(st.cylinder));
        let done = positioned + self.rotational_wait(positioned, lba % spt) + xfer;
        let end_lba = (off + len).div_ceil(SECTOR);
        st.cylinder = end_lba / spt / self.p.tracks_per_cylinder.max(1);
        st.busy_until = done;
        match access {
            Access::Read if self.p.cache == Cache::ReadAhead => {
                let track_end = (off + len).div_ceil(track_bytes) * track_bytes;
                st.read_ahead = Some((off, track_end + track_bytes));
            }
            Access::Write => {
                // A write over the read-ahead range makes the cached copy stale.
                if let Some((a, b)) = st.read_ahead {
                    if off < b && off + len > a {
                        st.read_ahead = None;
                    }
                }
                if self.p.cache == Cache::WriteBehind && !fua {
                    return start.min(now) + xfer;
                }
            }
            Access::Read => {}
        }
        done
    }

    /// The instant every booked operation is complete (for flush).
    pub fn idle_at(&self) -> Instant {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .busy_until
    }
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// A memory disk whose replies are delayed according to a [`DriveModel`].
#[derive(Debug)]
pub struct ModelledDisk {
    mem: MemDisk,
    model: DriveModel,
}

impl ModelledDisk {
    /// A modelled disk of `size` bytes.
    pub fn new(size: u64, p: DriveParams) -> Self {
        Self {
            mem: MemDisk::new(size),
            model: DriveModel::new(p, size),
        }
    }
}

impl Backend for ModelledDisk {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let t = self.model.book(Access::Read, off, buf.len() as u64, false);
        self.mem.read(off, buf)?;
        sleep_until(t);
        Ok(())
    }
    fn write(&self, off: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        let t = self.model.book(Access::Write, off, data.len() as u64, fua);
        self.mem.write(off, data, fua)?;
        sleep_until(t);
        Ok(())
    }
    fn trim(&self, off: u64, len: u64, fua: bool) -> Result<(), Errno> {
        // Trim touches only the drive's map, not the media.
        self.mem.trim(off, len, fua)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<(), Errno> {
        let t = self.model.book(Access::Write, off, len, fua);
        self.mem.write_zeroes(off, len, fua)?;
        sleep_until(t);
        Ok(())
    }
    fn flush(&self) -> Result<(), Errno> {
        sleep_until(self.model.idle_at());
        Ok(())
    }
    fn may_block(&self) -> bool {
        true
    }
    fn rotational(&self) -> bool {
        self.model.p.rpm > 0.0 || !self.model.p.seek.is_zero()
    }
    fn kind(&self) -> &'static str {
        "memory behind a drive model"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> DriveParams {
        DriveParams {
            rpm: 0.0,
            seek: Duration::from_millis(9),
            rate: 1e6,
            sectors_per_track: 64,
            tracks_per_cylinder: 4,
            cache: Cache::None,
        }
    }

    // The model's booked times are compared with each other, never with a clock reading, so
    // the machine's load cannot change the outcome.
    #[test]
    fn requests_queue_behind_each_other() {
        let m = DriveModel::new(params(), 1 << 30);
        let a = m.book(Access::Read, 0, 1_000, false);
        let b = m.book(Access::Read, 1_000, 1_000, false);
        // Same cylinder, no rotation: b finishes exactly one transfer time after a.
        assert_eq!(b - a, Duration::from_millis(1));
    }

    #[test]
    fn a_full_stroke_seek_costs_more_than_the_average() {
        let m = DriveModel::new(params(), 1 << 30);
        let a = m.book(Access::Read, 0, 0, false);
        let b = m.book(Access::Read, (1 << 30) - SECTOR, 0, false);
        assert!(b - a > Duration::from_millis(9), "{:?}", b - a);
        assert!(b - a < Duration::from_millis(18), "{:?}", b - a);
    }

    #[test]
    fn read_ahead_serves_the_next_track_without_seeking() {
        let mut p = params();
        p.cache = Cache::ReadAhead;
        let m = DriveModel::new(p, 1 << 30);
        m.book(Access::Read, 1 << 29, 512, false);
        let busy = m.idle_at();
        m.book(Access::Read, (1 << 29) + 512, 512, false);
        assert_eq!(m.idle_at(), busy, "a cache hit leaves the actuator alone");
    }

    #[test]
    fn write_behind_acknowledges_before_the_mechanism_finishes() {
        let mut p = params();
        p.cache = Cache::WriteBehind;
        let m = DriveModel::new(p, 1 << 30);
        let ack = m.book(Access::Write, 1 << 29, 512, false);
        assert!(ack < m.idle_at());
        let fua = m.book(Access::Write, 0, 512, true);
        assert_eq!(fua, m.idle_at());
    }
}
