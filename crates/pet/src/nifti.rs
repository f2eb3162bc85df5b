//! NIfTI-1 single-file volumes (`.nii`): the 348-byte header, 4 bytes of (empty) extension
//! flag, then `float32` voxels, `x` fastest, little-endian.
//!
//! The `sform` maps voxel `(i, j, k)` to offhost's scanner coordinates in mm
//! ([`crate::recon::Grid`]: `x = (i - n/2) p`, `y = (n/2 - j) p`, `z` centred on the axial
//! field of view), `qform` is unset, units mm.

use std::io::Write;
use std::path::Path;

use crate::error::ImageError;
use crate::volume::Volume;

/// Bytes before the voxels.
const VOX_OFFSET: usize = 352;

/// The header of a volume.
pub fn header(v: &Volume) -> Vec<u8> {
    let mut h = vec![0u8; VOX_OFFSET];
    let put_i16 = |h: &mut [u8], at: usize, x: i16| h[at..at + 2].copy_from_slice(&x.to_le_bytes());
    let put_f32 = |h: &mut [u8], at: usize, x: f32| h[at..at + 4].copy_from_slice(&x.to_le_bytes());
    h[0..4].copy_from_slice(&348i32.to_le_bytes());
    let dims = [3, v.n, v.n, v.slices, 1, 1, 1, 1];
    for (k, d) in dims.iter().enumerate() {
        put_i16(&mut h, 40 + 2 * k, i16::try_from(*d).unwrap_or(i16::MAX));
    }
    put_i16(&mut h, 70, 16); // datatype: float32
    put_i16(&mut h, 72, 32); // bits per voxel
    let (p, s) = (v.pixel_mm as f32, v.slice_mm as f32);
    for (k, x) in [1.0, p, p, s].iter().enumerate() {
        put_f32(&mut h, 76 + 4 * k, *x);
    }
    put_f32(&mut h, 108, VOX_OFFSET as f32);
    put_f32(&mut h, 112, 1.0); // scl_slope
    h[123] = 2; // xyzt_units: mm
    put_i16(&mut h, 254, 1); // sform_code: scanner coordinates
    let c = (v.n / 2) as f32;
    let zc = (v.slices as f32 - 1.0) / 2.0;
    let rows = [
        [p, 0.0, 0.0, -c * p],
        [0.0, -p, 0.0, c * p],
        [0.0, 0.0, s, -zc * s],
    ];
    for (r, row) in rows.iter().enumerate() {
        for (k, x) in row.iter().enumerate() {
            put_f32(&mut h, 280 + 16 * r + 4 * k, *x);
        }
    }
    h[344..348].copy_from_slice(b"n+1\0");
    h
}

/// Writes a volume as `.nii`; a volume over 32767 voxels along an axis is refused.
pub fn write(path: &Path, v: &Volume) -> Result<(), ImageError> {
    if v.n > i16::MAX as usize || v.slices > i16::MAX as usize {
        return Err(ImageError::Io(std::io::Error::other(format!(
            "{} x {} x {} voxels: NIfTI-1 holds at most 32767 along an axis",
            v.n, v.n, v.slices
        ))));
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&header(v))?;
    for x in &v.data {
        f.write_all(&x.to_le_bytes())?;
    }
    f.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_sit_where_nifti1_puts_them() {
        let v = Volume {
            n: 4,
            slices: 3,
            pixel_mm: 2.0,
            slice_mm: 3.0,
            data: (0..48).map(|i| i as f32).collect(),
        };
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.nii");
        write(&p, &v).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(b.len(), 352 + 48 * 4);
        let i16_at = |a: usize| i16::from_le_bytes([b[a], b[a + 1]]);
        let f32_at = |a: usize| f32::from_le_bytes(b[a..a + 4].try_into().unwrap());
        assert_eq!(i32::from_le_bytes(b[0..4].try_into().unwrap()), 348);
        assert_eq!(
            (0..4).map(|k| i16_at(40 + 2 * k)).collect::<Vec<_>>(),
            [3, 4, 4, 3]
        );
        assert_eq!((i16_at(70), i16_at(72)), (16, 32));
        assert_eq!((f32_at(80), f32_at(88), f32_at(108)), (2.0, 3.0, 352.0));
        assert_eq!(&b[344..348], b"n+1\0");
        // Voxel (1, 0, 2): x = (1 - 2) 2 = -2 mm, y = 4 mm, z = 3 mm.
        let srow = |r: usize| {
            (0..4)
                .map(|k| f32_at(280 + 16 * r + 4 * k))
                .collect::<Vec<_>>()
        };
        let (i, j, k) = (1.0, 0.0, 2.0);
        let w = |r: usize| srow(r)[0] * i + srow(r)[1] * j + srow(r)[2] * k + srow(r)[3];
        assert_eq!((w(0), w(1), w(2)), (-2.0, 4.0, 3.0));
        assert_eq!(f32_at(352 + 4 * 47), 47.0);
    }
}
