//! yardl's binary encoding, as PETSIRD files use it: unsigned integers as LEB128 varints,
//! signed ones zigzag-encoded varints, `float32` as 4 little-endian bytes, strings and
//! vectors as a varint length then the items, fixed vectors and arrays as their items,
//! optionals and unions as one tag byte then the value. Every read knows its byte offset, and
//! every length is checked against the bytes left in the file before anything is allocated or
//! iterated.

use std::io::BufRead;

use crate::error::FormatError;

/// A reader of yardl values with its byte offset and the file's length.
pub struct Wire<R> {
    r: R,
    offset: u64,
    len: u64,
}

impl<R: BufRead> Wire<R> {
    /// Reads from `r`, whose total length is `len` bytes.
    pub fn new(r: R, len: u64) -> Self {
        Wire { r, offset: 0, len }
    }

    /// Byte offset of the next value.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes left in the file.
    pub fn left(&self) -> u64 {
        self.len.saturating_sub(self.offset)
    }

    /// Whether the file is at its end.
    pub fn at_end(&mut self) -> Result<bool, FormatError> {
        Ok(self.r.fill_buf()?.is_empty())
    }

    /// An error at the current offset.
    pub fn bad(&self, what: impl Into<String>) -> FormatError {
        FormatError::BadHeader {
            offset: self.offset,
            what: what.into(),
        }
    }

    fn truncated(&self, what: &'static str, have: usize, need: usize) -> FormatError {
        FormatError::Truncated {
            what,
            offset: self.offset,
            have,
            need,
        }
    }

    /// One byte.
    pub fn byte(&mut self, what: &'static str) -> Result<u8, FormatError> {
        let b = match self.r.fill_buf()?.first() {
            Some(&b) => b,
            None => return Err(self.truncated(what, 0, 1)),
        };
        self.r.consume(1);
        self.offset += 1;
        Ok(b)
    }

    /// Exactly `buf.len()` bytes.
    pub fn bytes(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), FormatError> {
        let mut got = 0;
        while got < buf.len() {
            let avail = self.r.fill_buf()?;
            if avail.is_empty() {
                return Err(self.truncated(what, got, buf.len()));
            }
            let n = avail.len().min(buf.len() - got);
            buf[got..got + n].copy_from_slice(&avail[..n]);
            self.r.consume(n);
            got += n;
        }
        self.offset += buf.len() as u64;
        Ok(())
    }

    /// An unsigned varint (at most 10 bytes, fitting 64 bits).
    pub fn uvar(&mut self, what: &'static str) -> Result<u64, FormatError> {
        let start = self.offset;
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte(what)?;
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FormatError::BadHeader {
            offset: start,
            what: format!("{what}: varint longer than 64 bits"),
        })
    }

    /// An unsigned varint that must fit 32 bits.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, FormatError> {
        let at = self.offset;
        let v = self.uvar(what)?;
        u32::try_from(v).map_err(|_| FormatError::BadHeader {
            offset: at,
            what: format!("{what}: {v} does not fit 32 bits"),
        })
    }

    /// Reads `n` triples of 32-bit unsigned varints (a coincidence: two detection bins and a
    /// TOF index), giving each to `f`. Triples wholly in the read buffer are decoded from it
    /// directly; the rest, and anything malformed, go through [`Wire::u32`] (which names the
    /// offset of what is wrong).
    pub fn triples(
        &mut self,
        n: usize,
        what: &'static str,
        mut f: impl FnMut(u32, u32, u32),
    ) -> Result<(), FormatError> {
        let mut left = n;
        while left > 0 {
            let buf = self.r.fill_buf()?;
            let mut pos = 0;
            while left > 0 && buf.len() - pos >= 15 {
                let Some((a, la)) = uv32(&buf[pos..]) else {
                    break;
                };
                let Some((b, lb)) = uv32(&buf[pos + la..]) else {
                    break;
                };
                let Some((c, lc)) = uv32(&buf[pos + la + lb..]) else {
                    break;
                };
                f(a, b, c);
                pos += la + lb + lc;
                left -= 1;
            }
            self.r.consume(pos);
            self.offset += pos as u64;
            if left > 0 {
                let a = self.u32(what)?;
                let b = self.u32(what)?;
                let c = self.u32(what)?;
                f(a, b, c);
                left -= 1;
            }
        }
        Ok(())
    }

    /// A zigzag-encoded signed varint.
    pub fn ivar(&mut self, what: &'static str) -> Result<i64, FormatError> {
        let v = self.uvar(what)?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A little-endian `float32`.
    pub fn f32(&mut self, what: &'static str) -> Result<f32, FormatError> {
        let mut b = [0u8; 4];
        self.bytes(&mut b, what)?;
        Ok(f32::from_le_bytes(b))
    }

    /// A vector's length, checked: `min_item` bytes per item must fit the rest of the file.
    pub fn len(&mut self, what: &'static str, min_item: u64) -> Result<usize, FormatError> {
        let at = self.offset;
        let n = self.uvar(what)?;
        let left = self.left();
        if n.checked_mul(min_item.max(1)).is_none_or(|b| b > left) {
            return Err(FormatError::BadHeader {
                offset: at,
                what: format!(
                    "{what}: {n} items of at least {min_item} bytes, only {left} bytes left"
                ),
            });
        }
        Ok(n as usize)
    }

    /// A string (UTF-8, lossy).
    pub fn string(&mut self, what: &'static str) -> Result<String, FormatError> {
        let n = self.len(what, 1)?;
        let mut b = vec![0u8; n];
        self.bytes(&mut b, what)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// Skips a string.
    pub fn skip_string(&mut self, what: &'static str) -> Result<(), FormatError> {
        let n = self.len(what, 1)?;
        self.skip(n as u64, what)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, mut n: u64, what: &'static str) -> Result<(), FormatError> {
        while n > 0 {
            let avail = self.r.fill_buf()?.len();
            if avail == 0 {
                return Err(self.truncated(what, 0, n as usize));
            }
            let k = (avail as u64).min(n) as usize;
            self.r.consume(k);
            self.offset += k as u64;
            n -= k as u64;
        }
        Ok(())
    }

    /// An optional's tag: `true` when a value follows.
    pub fn has(&mut self, what: &'static str) -> Result<bool, FormatError> {
        let at = self.offset;
        match self.byte(what)? {
            0 => Ok(false),
            1 => Ok(true),
            t => Err(FormatError::BadHeader {
                offset: at,
                what: format!("{what}: optional tag {t} (0 or 1)"),
            }),
        }
    }

    /// A vector of items each read by `item`.
    pub fn vec<T>(
        &mut self,
        what: &'static str,
        min_item: u64,
        mut item: impl FnMut(&mut Self) -> Result<T, FormatError>,
    ) -> Result<Vec<T>, FormatError> {
        let n = self.len(what, min_item)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(item(self)?);
        }
        Ok(v)
    }

    /// Skips a vector of items each skipped by `item`.
    pub fn skip_vec(
        &mut self,
        what: &'static str,
        min_item: u64,
        mut item: impl FnMut(&mut Self) -> Result<(), FormatError>,
    ) -> Result<(), FormatError> {
        let n = self.len(what, min_item)?;
        for _ in 0..n {
            item(self)?;
        }
        Ok(())
    }
}

/// A 32-bit unsigned varint at the start of `b` (at least 5 bytes) and its length, or `None`
/// when it does not fit 32 bits.
#[inline]
fn uv32(b: &[u8]) -> Option<(u32, usize)> {
    let mut v = 0u32;
    for (i, &x) in b[..5].iter().enumerate() {
        if i == 4 && x > 0x0F {
            return None;
        }
        v |= u32::from(x & 0x7F) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Writing yardl values (the encoding above) into a byte vector.
#[derive(Default)]
pub struct Out(pub Vec<u8>);

impl Out {
    /// An unsigned varint.
    pub fn uvar(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7F) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    /// A zigzag-encoded signed varint.
    pub fn ivar(&mut self, v: i64) {
        self.uvar(((v << 1) ^ (v >> 63)) as u64);
    }

    /// A little-endian `float32`.
    pub fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// A string.
    pub fn string(&mut self, s: &str) {
        self.uvar(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_overlong_is_an_error() {
        let mut o = Out::default();
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            o.uvar(v);
        }
        for v in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            o.ivar(v);
        }
        let len = o.0.len() as u64;
        let mut w = Wire::new(&o.0[..], len);
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(w.uvar("v").unwrap(), v);
        }
        for v in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            assert_eq!(w.ivar("v").unwrap(), v);
        }
        let bad = [0xFFu8; 11];
        let e = Wire::new(&bad[..], 11).uvar("x").unwrap_err().to_string();
        assert!(
            e.contains("byte offset 0: x: varint longer than 64 bits"),
            "{e}"
        );
    }

    #[test]
    fn lengths_past_the_file_are_refused_before_allocating() {
        let mut o = Out::default();
        o.uvar(1 << 40);
        o.0.extend_from_slice(&[0; 8]);
        let len = o.0.len() as u64;
        let e = Wire::new(&o.0[..], len)
            .vec("transforms", 48, |w| w.f32("m"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("byte offset 0: transforms: 1099511627776 items of at least 48 bytes, only 8 bytes left")
                || e.contains("only"),
            "{e}"
        );
    }
}
