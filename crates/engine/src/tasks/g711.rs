//! ITU-T G.711 mu-law and A-law encoding of 16-bit linear samples.
//!
//! The segment search follows the classic reference coder (Sun Microsystems' public g711.c):
//! mu-law works on the top 14 bits with a bias of 33, A-law on the top 13 bits with even-bit
//! inversion.

use std::sync::OnceLock;

const SEG_UEND: [i16; 8] = [0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF];
const SEG_AEND: [i16; 8] = [0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF];

fn segment(v: i16, table: &[i16; 8]) -> usize {
    table.iter().position(|&e| v <= e).unwrap_or(8)
}

/// Encodes one 16-bit linear sample as mu-law.
pub fn linear_to_ulaw(sample: i16) -> u8 {
    let mut v = sample >> 2; // 14-bit
    let mask: u8 = if v < 0 {
        v = -v;
        0x7F
    } else {
        0xFF
    };
    v = v.min(8159) + 33;
    let seg = segment(v, &SEG_UEND);
    if seg >= 8 {
        0x7F ^ mask
    } else {
        (((seg as u8) << 4) | ((v >> (seg + 1)) as u8 & 0x0F)) ^ mask
    }
}

/// Decodes one mu-law code to its 16-bit linear value (the middle of the code's interval,
/// as the reference decoder gives it).
pub fn ulaw_to_linear(code: u8) -> i16 {
    let u = !code;
    let t = ((i16::from(u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4);
    if u & 0x80 != 0 {
        0x84 - t
    } else {
        t - 0x84
    }
}

/// Encodes one 16-bit linear sample as A-law.
pub fn linear_to_alaw(sample: i16) -> u8 {
    let mut v = sample >> 3; // 13-bit
    let mask: u8 = if v >= 0 {
        0xD5
    } else {
        v = -v - 1;
        0x55
    };
    let seg = segment(v, &SEG_AEND);
    if seg >= 8 {
        0x7F ^ mask
    } else {
        let q = if seg < 2 {
            (v >> 1) & 0x0F
        } else {
            (v >> seg) & 0x0F
        };
        (((seg as u8) << 4) | q as u8) ^ mask
    }
}

fn table(f: fn(i16) -> u8) -> Box<[u8; 65536]> {
    let mut t = Box::new([0u8; 65536]);
    for (i, e) in t.iter_mut().enumerate() {
        *e = f(i as u16 as i16);
    }
    t
}

/// A 64 Ki-entry mu-law table indexed by the sample's bits.
pub fn ulaw_table() -> &'static [u8; 65536] {
    static T: OnceLock<Box<[u8; 65536]>> = OnceLock::new();
    T.get_or_init(|| table(linear_to_ulaw))
}

/// A 64 Ki-entry A-law table indexed by the sample's bits.
pub fn alaw_table() -> &'static [u8; 65536] {
    static T: OnceLock<Box<[u8; 65536]>> = OnceLock::new();
    T.get_or_init(|| table(linear_to_alaw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes() {
        // Silence and full scale, as in G.711's tables.
        assert_eq!(linear_to_ulaw(0), 0xFF);
        assert_eq!(linear_to_ulaw(-1), 0x7E);
        assert_eq!(linear_to_ulaw(i16::MAX), 0x80);
        assert_eq!(linear_to_ulaw(i16::MIN), 0x00);
        assert_eq!(linear_to_alaw(0), 0xD5);
        assert_eq!(linear_to_alaw(-1), 0x55);
        assert_eq!(linear_to_alaw(i16::MAX), 0xAA);
        assert_eq!(linear_to_alaw(i16::MIN), 0x2A);
    }

    #[test]
    fn every_mu_law_code_decodes_to_a_value_that_encodes_back_to_it() {
        for code in 0..=255u8 {
            // 0x7F and 0xFF are both zero (negative and positive); zero encodes as 0xFF.
            let back = linear_to_ulaw(ulaw_to_linear(code));
            assert!(
                back == code || (code == 0x7F && back == 0xFF),
                "{code:#x} -> {back:#x}"
            );
        }
        assert_eq!(ulaw_to_linear(0x80), 32124);
        assert_eq!(ulaw_to_linear(0x00), -32124);
    }

    #[test]
    fn monotonic_in_magnitude() {
        let mut last = 0u8;
        for s in (0..=i16::MAX).step_by(7) {
            let code = !linear_to_ulaw(s) & 0x7F;
            assert!(code >= last);
            last = code;
        }
    }
}
