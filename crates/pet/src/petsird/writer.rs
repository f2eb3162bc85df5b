//! Writing offhost events as PETSIRD 0.12.
//!
//! The scanner is one module type: a module is one crystal (a box 20 mm deep, 90 % of the
//! crystal pitch wide and of the ring spacing high, centred on the crystal radius), replicated
//! `rings x detectors` times, module `ring * detectors + detector` turned by
//! `2 pi detector / detectors` about `z` and shifted to the ring's `z` (offhost's geometry, so
//! [`super::RingMap`] maps it back exactly). Energies go into 10 keV bins from 0 to 1000 keV;
//! one TOF bin (TOF is not written); no efficiencies, singles, exam information. Events are
//! grouped into 1 ms event blocks by their time; each coincidence's detection bins are ordered
//! (first >= second), as PETSIRD requires. The preamble carries PETSIRD 0.12's schema (the
//! protocol definition of the `petsird` package, Apache-2.0, `schema_0_12.json`).

use std::io::Write;

use super::wire::Out;
use crate::error::FormatError;
use crate::geometry::Scanner;
use crate::listmode::Event;

/// PETSIRD 0.12's protocol schema, as the preamble carries it.
const SCHEMA: &str = include_str!("schema_0_12.json");
/// Energy bin width and count (keV): 0 to 1000 keV.
const ENERGY_BIN_KEV: f32 = 10.0;
const ENERGY_BINS: u32 = 100;
/// Crystal depth, mm.
const DEPTH_MM: f32 = 20.0;

/// Writes a PETSIRD stream: the header at creation, then events in time order.
pub struct PetsirdWriter<W: Write> {
    w: W,
    block: Option<u32>,
    prompts: Vec<[u32; 2]>,
    delayeds: Vec<[u32; 2]>,
    detectors: u32,
    rings: u32,
    written: u64,
    /// Bytes written so far.
    bytes: u64,
}

fn preamble_and_header(s: &Scanner) -> Vec<u8> {
    let mut o = Out::default();
    o.0.extend_from_slice(b"yardl");
    o.0.extend_from_slice(&1u32.to_le_bytes());
    o.string(SCHEMA.trim_end());
    o.string(&s.name);
    // scanner geometry: one module type
    o.uvar(1);
    let (r, pitch) = (s.crystal_radius_mm as f32, s.ring_spacing_mm as f32);
    let width = 0.9 * std::f32::consts::TAU * r / s.detectors_per_ring as f32;
    let (x0, x1) = (r - DEPTH_MM / 2.0, r + DEPTH_MM / 2.0);
    let (y, z) = (width / 2.0, 0.45 * pitch);
    for c in [
        [x0, -y, -z],
        [x0, -y, z],
        [x0, y, z],
        [x0, y, -z],
        [x1, -y, -z],
        [x1, -y, z],
        [x1, y, z],
        [x1, y, -z],
    ] {
        c.iter().for_each(|&v| o.f32(v));
    }
    o.uvar(1); // material id
    o.uvar(1); // one element, identity
    for v in [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0] {
        o.f32(v);
    }
    o.uvar(0); // non-detecting elements
    let n = s.detectors_per_ring;
    o.uvar(u64::from(s.rings) * u64::from(n));
    for ring in 0..s.rings {
        let zr = (ring as f64 + 0.5) * s.ring_spacing_mm - s.axial_length_mm() / 2.0;
        for d in 0..n {
            let phi = std::f64::consts::TAU * f64::from(d) / f64::from(n);
            let (sn, cs) = phi.sin_cos();
            for v in [cs, -sn, 0.0, 0.0, sn, cs, 0.0, 0.0, 0.0, 0.0, 1.0, zr] {
                o.f32(v as f32);
            }
        }
    }
    o.0.push(0); // no non-detecting volumes
    o.uvar(0); // bulk materials
    o.0.push(0); // no gantry alignment
    o.string(""); // collimator type
    let edges = |o: &mut Out, e: &[f32]| {
        o.uvar(e.len() as u64);
        e.iter().for_each(|&v| o.f32(v));
    };
    o.uvar(1);
    o.uvar(1);
    edges(&mut o, &[-2.0 * x1, 2.0 * x1]); // one TOF bin over the whole line (mm)
    o.uvar(1);
    o.uvar(1);
    o.f32(0.0); // TOF resolution: none
    o.uvar(1);
    let e: Vec<f32> = (0..=ENERGY_BINS)
        .map(|i| i as f32 * ENERGY_BIN_KEV)
        .collect();
    edges(&mut o, &e);
    o.uvar(1);
    o.f32(0.0); // energy resolution at 511: not given
    o.ivar(0); // singles histogram level: none
    o.uvar(0);
    o.uvar(0);
    for policy in [0, 4, 4, 0, 0] {
        o.ivar(policy); // singles none, prompts and delayeds "other", no triples, quadruples
    }
    o.string(""); // detection efficiencies: none given
    o.f32(1.0);
    o.uvar(0);
    o.uvar(1); // module-pair SGID LUT: an empty one for the one pair of module types
    o.uvar(1);
    o.uvar(0);
    o.uvar(0);
    o.0.push(0); // no exam information
    o.0
}

impl<W: Write> PetsirdWriter<W> {
    /// Writes the preamble and the header for `scanner`.
    pub fn new(mut w: W, scanner: &Scanner) -> Result<Self, FormatError> {
        let head = preamble_and_header(scanner);
        w.write_all(&head)?;
        Ok(PetsirdWriter {
            bytes: head.len() as u64,
            w,
            block: None,
            prompts: Vec::new(),
            delayeds: Vec::new(),
            detectors: scanner.detectors_per_ring,
            rings: scanner.rings,
            written: 0,
        })
    }

    fn bin(&self, ring: u8, det: u16, energy: u16) -> u32 {
        let crystal = u32::from(ring) * self.detectors + u32::from(det);
        let e = (u32::from(energy) / (ENERGY_BIN_KEV as u32 * 10)).min(ENERGY_BINS - 1);
        crystal * ENERGY_BINS + e
    }

    fn flush_block(&mut self) -> Result<(), FormatError> {
        let Some(ms) = self.block else {
            return Ok(());
        };
        let mut o = Out::default();
        o.uvar(1); // one item in this chunk of the stream
        o.0.push(0); // event time block
        o.uvar(u64::from(ms));
        o.uvar(u64::from(ms) + 1);
        o.uvar(0); // singles
        for list in [&self.prompts, &self.delayeds] {
            o.uvar(1);
            o.uvar(1);
            o.uvar(list.len() as u64);
            for b in list {
                o.uvar(u64::from(b[0]));
                o.uvar(u64::from(b[1]));
                o.uvar(0);
            }
        }
        o.uvar(0); // triples
        o.uvar(0); // quadruples
        self.w.write_all(&o.0)?;
        self.bytes += o.0.len() as u64;
        self.prompts.clear();
        self.delayeds.clear();
        Ok(())
    }

    /// Adds events (times in order); an event outside the scanner is an error.
    pub fn write_events(&mut self, events: &[Event]) -> Result<(), FormatError> {
        for e in events {
            if u32::from(e.det_a) >= self.detectors
                || u32::from(e.det_b) >= self.detectors
                || u32::from(e.ring_a) >= self.rings
                || u32::from(e.ring_b) >= self.rings
            {
                return Err(FormatError::Mismatch {
                    offset: self.bytes,
                    what: format!(
                        "event {} (ring {} detector {}, ring {} detector {}) is outside the {} rings x {} detectors",
                        self.written, e.ring_a, e.det_a, e.ring_b, e.det_b, self.rings, self.detectors
                    ),
                });
            }
            let ms = e.time_us / 1000;
            if self.block.is_some_and(|b| b != ms) {
                self.flush_block()?;
            }
            self.block = Some(ms);
            let a = self.bin(e.ring_a, e.det_a, e.energy_a);
            let b = self.bin(e.ring_b, e.det_b, e.energy_b);
            let pair = [a.max(b), a.min(b)];
            if e.delayed {
                self.delayeds.push(pair);
            } else {
                self.prompts.push(pair);
            }
            self.written += 1;
        }
        Ok(())
    }

    /// Writes the last block and the end of the stream; returns the writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        self.flush_block()?;
        self.w.write_all(&[0])?;
        self.w.flush()?;
        Ok(self.w)
    }
}
