//! Sizes and durations as offhost writes them, in one place for every command, pipeline
//! argument and export specification.
//!
//! - Sizes are bytes with an optional binary multiple: `4096`, `64k`, `64K`, `64KiB`, `64KB`,
//!   `1M`, `1.5G`, `2T` (K = 1024; a trailing `B` or `iB` changes nothing). Parsing is done by
//!   the [`parse-size`](https://docs.rs/parse-size) crate; this crate fixes its configuration
//!   and its error messages.
//! - Durations carry a unit: `100ns`, `500us`, `8ms`, `2s`, `1m 30s` (the
//!   [`humantime`](https://docs.rs/humantime) crate). [`parse_seconds`] also takes a bare
//!   number of seconds (`2.5`), as command-line timeouts are written.
//! - Limits: [`OverLimit`] is how every layer says that something asked for more than one of
//!   its budgets' [`Limit`]s allows, in no front end's words (see [`limit`]'s doc); [`Needs`]
//!   is how it says that a [`Setting`] would have allowed what it refused ([`setting`]).
#![forbid(unsafe_code)]

use std::time::Duration;

pub mod limit;
pub mod setting;
pub use limit::{explain, Limit, OverLimit, Remedy};
pub use setting::{Needs, Setting};

/// What is wrong with a size or a duration. The message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnitError {
    /// Not a size.
    #[error("`{text}` is not a size (e.g. 4096, 64K, 1M, 2GiB): {reason}")]
    Size {
        /// The text as given.
        text: String,
        /// What the parser found wrong.
        reason: String,
    },
    /// A size larger than what takes it can hold.
    #[error("`{text}` is {value} bytes, more than the largest this takes, {max}")]
    SizeTooLarge {
        /// The text as given.
        text: String,
        /// Its value.
        value: u64,
        /// The largest value taken.
        max: u64,
    },
    /// Not a duration.
    #[error("`{text}` is not a duration (e.g. 100us, 8ms, 2s): {reason}")]
    Duration {
        /// The text as given.
        text: String,
        /// What the parser found wrong.
        reason: String,
    },
}

/// Parses a size in bytes with an optional binary multiple (`64K` = 65536).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    // The crate adds digits without checking for overflow (a panic in debug builds, a wrong
    // value in release ones): the number in front is checked here first.
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (int, frac) = t[..end].split_once('.').unwrap_or((&t[..end], ""));
    let digits = |s: &str| s.chars().filter(char::is_ascii_digit).count();
    if int.replace('_', "").parse::<u64>().is_err() && digits(int) > 0 || digits(frac) > 18 {
        return Err(UnitError::Size {
            text: text.to_string(),
            reason: "the number is too large".into(),
        });
    }
    parse_size::Config::new()
        .with_binary()
        .parse_size(text.trim())
        .map_err(|e| UnitError::Size {
            text: text.to_string(),
            reason: e.to_string(),
        })
}

/// Parses a size as [`parse_size()`] does, into a narrower integer (`u32`, `usize`): a size that
/// does not fit is an error that says the largest that does.
pub fn parse_size_as<T: TryFrom<u64>>(text: &str) -> Result<T, UnitError> {
    let n = parse_size(text)?;
    T::try_from(n).map_err(|_| UnitError::SizeTooLarge {
        text: text.to_string(),
        value: n,
        max: max_of::<T>(),
    })
}

/// The largest `u64` that `T` holds.
fn max_of<T: TryFrom<u64>>() -> u64 {
    // Halving from the top finds it in at most 64 tries.
    let (mut lo, mut hi) = (0u64, u64::MAX);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if T::try_from(mid).is_ok() {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Parses a duration with a unit (`8ms`, `2s`, `1m 30s`).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    humantime::parse_duration(text.trim()).map_err(|e| UnitError::Duration {
        text: text.to_string(),
        reason: e.to_string(),
    })
}

/// Parses a duration given as a bare number of seconds (`10`, `0.5`) or with a unit (`500ms`).
pub fn parse_seconds(text: &str) -> Result<Duration, UnitError> {
    let t = text.trim();
    match t.parse::<f64>() {
        Ok(v) => Duration::try_from_secs_f64(v).map_err(|e| UnitError::Duration {
            text: text.to_string(),
            reason: e.to_string(),
        }),
        Err(_) => parse_duration(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_multiples_in_every_spelling() {
        for (text, v) in [
            ("4096", 4096),
            ("64k", 65536),
            ("64K", 65536),
            ("64KiB", 65536),
            ("64KB", 65536),
            (" 1M ", 1 << 20),
            ("1MiB", 1 << 20),
            ("1.5K", 1536),
            ("2G", 2 << 30),
            ("1T", 1 << 40),
            ("1P", 1 << 50),
        ] {
            assert_eq!(parse_size(text), Ok(v), "{text}");
        }
    }

    #[test]
    fn narrower_sizes_say_the_largest_that_fits() {
        assert_eq!(parse_size_as::<u32>("64M"), Ok(64u32 << 20));
        assert_eq!(parse_size_as::<u8>("255"), Ok(255u8));
        let e = parse_size_as::<u32>("4G").unwrap_err().to_string();
        assert_eq!(
            e,
            "`4G` is 4294967296 bytes, more than the largest this takes, 4294967295"
        );
        assert_eq!(max_of::<u64>(), u64::MAX);
        assert_eq!(max_of::<u16>(), 65535);
    }

    #[test]
    fn bad_sizes_name_the_text() {
        for text in [
            "",
            "x",
            "12Q",
            "-1",
            "99999999999999999999P",
            // Found by the ion_pipeline fuzz target: the crate's digit sum overflowed.
            "1844674407370955161595516l",
            "18446744073709551615P",
            "1.0000000000000000000000000001K",
        ] {
            let e = parse_size(text).unwrap_err();
            assert!(e.to_string().contains(&format!("`{text}`")), "{e}");
        }
    }

    #[test]
    fn durations_need_a_unit_and_seconds_do_not() {
        assert_eq!(parse_duration("8ms"), Ok(Duration::from_millis(8)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("100ns"), Ok(Duration::from_nanos(100)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("8").is_err());
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("750ms"), Ok(Duration::from_millis(750)));
        let e = parse_seconds("-1").unwrap_err();
        assert!(e.to_string().contains("`-1`"), "{e}");
        assert!(parse_seconds("soon").is_err());
    }
}
