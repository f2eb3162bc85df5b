//! The papers' published figures (numbers only), to be printed beside today's.
//!
//! `[SUN-T]` measured a SUN3/110 (2 MIPS) and a SUN4/110 (7.5 MIPS) host against a T800
//! transputer echoing packets; `[DS-link]` measured two Pentium Pro 200 MHz PCs joined by DSNIC
//! boards over one DS link.

/// Packet sizes of `[SUN-T]`, Tables 1 to 3 (bytes).
pub const SIZES_000: [usize; 10] = [4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576];

/// `[SUN-T]` Table 1 (unbuffered polling), bytes/s: SUN3 original unoptimised, SUN3 original
/// optimised, SUN3 best optimised, SUN4 best optimised.
pub const T1_UNBUFFERED: [[u32; 4]; 10] = [
    [7272, 6779, 7142, 25804],
    [24241, 24612, 27112, 88393],
    [55652, 68084, 94116, 147460],
    [83116, 121319, 226550, 356948],
    [94902, 150137, 356771, 424504],
    [98319, 160078, 414423, 450500],
    [99203, 162560, 431484, 455887],
    [99438, 162812, 435070, 457872],
    [98596, 162560, 433273, 439179],
    [99015, 145222, 388342, 439179],
];

/// `[SUN-T]` Table 2 (buffered polling, FIFO of 1024 B), bytes/s: SUN3 full FIFO, SUN3 half
/// FIFO, SUN4 best.
pub const T2_BUFFERED: [[u32; 3]; 10] = [
    [133335, 133333, 258065],
    [266671, 301850, 432433],
    [400002, 399966, 501956],
    [474066, 485421, 515250],
    [519760, 540465, 559216],
    [633527, 708465, 779587],
    [733198, 765347, 859435],
    [768107, 779536, 886715],
    [773817, 782475, 888593],
    [703709, 757057, 875608],
];

/// `[SUN-T]` Table 3 (interrupt driver), bytes/s: SUN3, SUN4.
pub const T3_INTERRUPT: [[u32; 2]; 10] = [
    [2806, 6055],
    [10973, 23356],
    [40274, 81214],
    [121550, 213411],
    [357548, 547888],
    [609601, 775244],
    [704877, 806550],
    [747593, 829684],
    [751612, 844723],
    [729392, 843024],
];

/// `[SUN-T]` Table 4 (4-byte transfers to VME memory), bytes/s, rows in [`super::copies::Style`]
/// order: SUN4 to/from shared VME RAM, SUN4 to/from dual-ported RAM, transputer to/from
/// shared VME RAM.
pub const T4_WORDS: [[u32; 3]; 4] = [
    [4474000, 3735000, 702200],
    [3907000, 3730000, 606700],
    [3231000, 2813000, 520800],
    [2853000, 2795000, 532600],
];

/// Block sizes of `[SUN-T]` Table 5 (bytes).
pub const SIZES_T5: [usize; 9] = [4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144];

/// `[SUN-T]` Table 5 (transputer bcopy), bytes/s: dual-ported RAM to shared VME RAM, shared VME
/// RAM to dual-ported RAM. (The paper prints the 256-byte second column as "2,877,00"; read
/// here as 2,877,000.)
pub const T5_BCOPY: [[u32; 2]; 9] = [
    [446000, 446000],
    [1250000, 1315000],
    [2500000, 2325000],
    [3225000, 2877000],
    [3455000, 3053000],
    [3522000, 3106000],
    [3542000, 3121000],
    [3548000, 3129000],
    [3548000, 3130000],
];

/// `[DS-link]` Table 2 (Comms2, packet size 4096): situation, n_1/2 (bytes), t0 (µs).
pub const T2_002: [(&str, u32, f64); 4] = [
    ("no load", 3000, 187.0),
    ("thread load", 3000, 187.0),
    ("process load", 13000, 783.0),
    ("T9000 (1 C104)", 26, 3.25),
];

/// Packet sizes of `[DS-link]` (bytes).
pub const PACKETS_002: [usize; 10] = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// `[DS-link]` Table 3 (maximum CPU load for 0.5 to 1 MB messages), percent: Comms1, Comms2.
pub const T3_002: [[f64; 2]; 10] = [
    [100.0, 92.8],
    [100.0, 87.4],
    [100.0, 82.8],
    [99.9, 79.5],
    [99.9, 89.8],
    [93.7, 93.0],
    [55.3, 97.2],
    [28.9, 53.4],
    [14.1, 36.1],
    [7.1, 19.0],
];

/// `[DS-link]` section 8: Comms1 asymptotic throughput, MB/s.
pub const COMMS1_MAX_MB_S: f64 = 8.3;
/// `[DS-link]` section 8: Comms2 asymptotic throughput, MB/s.
pub const COMMS2_MAX_MB_S: f64 = 16.6;
/// `[DS-link]` section 8.2: minimal Comms1 latency for packets up to 512 B, µs.
pub const COMMS1_MIN_LATENCY_US: f64 = 67.0;
/// `[DS-link]` section 8.1: smallest packet size reaching the maximum throughput, bytes.
pub const MIN_PACKET_FOR_MAX: usize = 512;

/// `[Off-host]` Table 1 (a): a one-byte SEND_MESSAGE on the off-host XTP board, host time, us:
/// (operation, us per call, calls, total us).
pub const T1A_004: [(&str, u32, u32, u32); 10] = [
    ("wait for completion", 3881, 1, 3881),
    ("physio() & iodone()", 301, 3, 903),
    ("read() system call", 81, 2, 162),
    ("signal delivery", 143, 1, 143),
    ("write() system call", 83, 1, 83),
    ("disable signals", 25, 3, 75),
    ("enable signals", 22, 3, 66),
    ("control block copyin()", 29, 1, 29),
    ("ack block copyout()", 23, 1, 23),
    ("other", 0, 0, 732),
];
/// `[Off-host]` Table 1 (a) total, us.
pub const T1A_004_TOTAL: u32 = 6097;
/// `[Off-host]` Table 1 (b): the same for 64 KiB, the rows that differ or are added.
pub const T1B_004: [(&str, u32, u32, u32); 3] = [
    ("wait for completion", 23455, 1, 23455),
    ("data copyin()", 18164, 1, 18164),
    ("get and return buffer", 109, 1, 109),
];
/// `[Off-host]` Table 1 (b) "other" and total, us.
pub const T1B_004_OTHER_TOTAL: (u32, u32) = (1636, 44848);
/// `[Off-host]` §4: host interrupts per 64 KiB message, in-host (kernel XTP) and off-host.
pub const INTERRUPTS_004: (u32, u32) = (26, 1);
/// `[DS-link]` Part 1, Figure 1: one virtual link between directly joined T9000s, and the DS
/// link's measured limit, MB/s.
pub const F1_002: (f64, f64) = (6.4, 7.0);
/// `[DS-link]` Part 1, Figure 5: the most short messages per second, and the CPU time of each, us.
pub const F5_002: (u32, f64) = (430_000, 2.33);
/// `[ION]` Table 1 (the ION tasking system on a 68030), microseconds.
pub const T1_003: [(&str, u32); 8] = [
    ("null subroutine", 1),
    ("interrupt dispatch", 4),
    ("null interrupt service", 9),
    ("task switch", 25),
    ("event synchronisation", 16),
    ("simple system call", 8),
    ("same processor null client/server call", 105),
    ("remote processor null client/server call", 140),
];
/// `[ION]` Table 2 (real disk against zero-latency pseudo-disk), seconds: operation, disk,
/// real, user, system.
pub const T2_003: [(&str, &str, f64, f64, f64); 6] = [
    ("build ION", "real disk", 156.7, 81.2, 28.2),
    ("build ION", "pseudo-disk", 126.6, 81.0, 27.7),
    ("copy a 2 MB file", "real disk", 11.5, 0.0, 1.6),
    ("copy a 2 MB file", "pseudo-disk", 7.2, 0.0, 1.6),
    ("4000 random 1-sector reads", "real disk", 67.7, 0.1, 4.2),
    ("4000 random 1-sector reads", "pseudo-disk", 8.1, 0.1, 2.7),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The transcription agrees with the papers' own summaries: unbuffered SUN3 best peaks
    /// at 435,070 B/s and buffered (half FIFO) at 782,475 B/s.
    #[test]
    fn transcription_matches_the_papers_summaries() {
        let best_unbuf = T1_UNBUFFERED.iter().map(|r| r[2]).max().unwrap();
        assert_eq!(best_unbuf, 435070);
        let best_buf = T2_BUFFERED.iter().map(|r| r[1]).max().unwrap();
        assert_eq!(best_buf, 782475);
        assert_eq!(T2_002[2].1, 13000);
        assert_eq!(T3_002[9], [7.1, 19.0]);
        assert_eq!(SIZES_000.len(), T3_INTERRUPT.len());
        // [ION]'s improvements: 1.2, 1.6 and 8.4.
        let imp = |i: usize| T2_003[i].2 / T2_003[i + 1].2;
        assert_eq!(
            format!("{:.1} {:.1} {:.1}", imp(0), imp(2), imp(4)),
            "1.2 1.6 8.4"
        );
    }
}
