//! Message-size lists: `8,64,4096`, a range of powers of two `4..1M`, with `K`/`M` suffixes.

/// Smallest size of the default range (the seed tables start at 4 B).
pub const DEFAULT_MIN: usize = 4;
/// Largest size of the default range (the seed tables end at 1 MiB).
pub const DEFAULT_MAX: usize = 1 << 20;

/// What is wrong with a size list.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeError {
    /// The list was empty.
    #[error("empty size list")]
    Empty,
    /// One entry is not a number with an optional K/M/G suffix.
    #[error("bad size {0:?}: expected a number with an optional K, M or G suffix")]
    BadNumber(String),
    /// A size of zero bytes was asked for.
    #[error("size 0 in {0:?}: sizes must be at least 1 byte")]
    Zero(String),
    /// A range's ends are not powers of two or are reversed.
    #[error("bad range {0:?}: ends must be powers of two with the lower first")]
    BadRange(String),
}

/// Parses one size such as `64`, `4K`, `4KiB`, `1M` (K = 1024; [`offhost_units::parse_size`]).
pub fn parse_size(text: &str) -> Result<usize, SizeError> {
    let t = text.trim();
    let v = offhost_units::parse_size(t).map_err(|_| SizeError::BadNumber(t.to_string()))?;
    let v = usize::try_from(v).map_err(|_| SizeError::BadNumber(t.to_string()))?;
    if v == 0 {
        return Err(SizeError::Zero(t.to_string()));
    }
    Ok(v)
}

/// Parses a size list: comma-separated sizes and/or ranges `LO..HI` of powers of two.
///
/// The result is sorted and free of duplicates.
pub fn parse_sizes(text: &str) -> Result<Vec<usize>, SizeError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((lo, hi)) = part.split_once("..") {
            let lo = parse_size(lo)?;
            let hi = parse_size(hi.trim_start_matches('='))?;
            out.extend(pow2_range(lo, hi).ok_or_else(|| SizeError::BadRange(part.into()))?);
        } else {
            out.push(parse_size(part)?);
        }
    }
    if out.is_empty() {
        return Err(SizeError::Empty);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Powers of two from `lo` to `hi` inclusive, or `None` if the ends are not powers of two
/// or `lo > hi`.
pub fn pow2_range(lo: usize, hi: usize) -> Option<Vec<usize>> {
    if !lo.is_power_of_two() || !hi.is_power_of_two() || lo > hi {
        return None;
    }
    let mut v = Vec::new();
    let mut s = lo;
    while s <= hi {
        v.push(s);
        match s.checked_mul(2) {
            Some(n) => s = n,
            None => break,
        }
    }
    Some(v)
}

/// The default sizes: powers of two from 4 B to 1 MiB.
pub fn default_sizes() -> Vec<usize> {
    pow2_range(DEFAULT_MIN, DEFAULT_MAX).unwrap_or_default()
}

/// Formats a size as `4`, `4K`, `1M` (K = 1024) when it divides evenly.
pub fn format_size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_sizes("8,64,4096").unwrap(), vec![8, 64, 4096]);
        assert_eq!(parse_sizes("4..64").unwrap(), vec![4, 8, 16, 32, 64]);
        assert_eq!(parse_sizes("4..1M").unwrap().len(), 19);
        assert_eq!(parse_sizes("1M, 8, 4K,8").unwrap(), vec![8, 4096, 1 << 20]);
        assert_eq!(parse_sizes("2KiB").unwrap(), vec![2048]);
        assert_eq!(default_sizes(), parse_sizes("4..1M").unwrap());
    }

    #[test]
    fn bad_input_says_what() {
        assert_eq!(parse_sizes(""), Err(SizeError::Empty));
        assert_eq!(parse_sizes("8,x"), Err(SizeError::BadNumber("x".into())));
        assert_eq!(parse_sizes("0"), Err(SizeError::Zero("0".into())));
        assert_eq!(
            parse_sizes("6..64"),
            Err(SizeError::BadRange("6..64".into()))
        );
        assert_eq!(
            parse_sizes("64..8"),
            Err(SizeError::BadRange("64..8".into()))
        );
        assert!(parse_sizes("99999999999999999999G").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_size(4), "4");
        assert_eq!(format_size(4096), "4K");
        assert_eq!(format_size(1 << 20), "1M");
        assert_eq!(format_size(1500), "1500");
    }
}
