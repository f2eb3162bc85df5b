//! What an export is backed by.

use crate::proto::Errno;

/// Storage behind an export. Implementations are shared by every connection to the export, so
/// they must be safe to call from many threads at once.
pub trait Backend: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Fills `buf` from `off`. The caller has checked the range.
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), Errno>;
    /// Writes `data` at `off`; with `fua`, returns only once the data is stable.
    fn write(&self, off: u64, data: &[u8], fua: bool) -> Result<(), Errno>;
    /// Discards a range (reads as zeroes afterwards for the backends here).
    fn trim(&self, off: u64, len: u64, fua: bool) -> Result<(), Errno>;
    /// Writes zeroes over a range.
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<(), Errno>;
    /// Makes every completed write stable.
    fn flush(&self) -> Result<(), Errno>;
    /// Whether a request may take long (modelled latency, waiting for data). The server runs
    /// such requests on their own threads so that later requests overtake them; requests on
    /// backends that never block run inline on the connection's reader.
    fn may_block(&self) -> bool {
        false
    }
    /// Whether the backend behaves like a rotating disk (`NBD_FLAG_ROTATIONAL`).
    fn rotational(&self) -> bool {
        false
    }
    /// What kind of export it is, in a few words for the server's log ("memory", "memory
    /// behind a drive model", "actions").
    fn kind(&self) -> &'static str;
}
