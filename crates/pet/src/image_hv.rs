//! Interfile images as STIR writes and reads them: a `.hv` header and a raw `.v` data file of
//! little-endian `float` voxels, `x` fastest, then `y`, then `z` (slices). STIR's `y` index
//! grows with `y` and is 0 at the centre voxel, `n / 2` rows from the first; offhost's row
//! `r` is at `y = (n / 2 - r)` voxels, so the file's row `R` holds offhost's row
//! `(2 (n / 2) - R) mod n` (`mirror_rows`): for an even `n` the two grids share every row
//! but one, `y = +n / 2` voxels in offhost's (at the edge of its field of view) and
//! `y = -n / 2` in STIR's, which trade places. STIR's OSEM and offhost's of the same sinogram
//! agree voxel for voxel in that orientation (`docs/notes/pet.md`, "Images").
//!
//! Keys written are those of STIR's `write_basic_interfile_image_header` (`!INTERFILE`,
//! `name of data file`, `!type of data := PET`, `imagedata byte order`, `!number format`,
//! `!number of bytes per pixel`, `number of dimensions := 3`, the axes' `matrix axis label`,
//! `!matrix size` and `scaling factor (mm/pixel)`, `first pixel offset (mm)`, `number of time
//! frames`). The reader takes offhost's and STIR's images (`float`, 4 bytes, either byte
//! order, `data offset in bytes`), the size checked against the data file before anything is
//! allocated.

use std::io::{Read, Seek};
use std::path::Path;

use crate::error::{FormatError, ImageError};
use crate::volume::Volume;

/// Most voxels an image read from a file may hold (2^28, 1 GiB of floats).
pub const MAX_VOXELS: u64 = 1 << 28;

/// The header text for volume `v` whose data file is named `data_file`.
pub fn header(v: &Volume, data_file: &str) -> String {
    let c = (v.n / 2) as f64 * v.pixel_mm;
    format!(
        "!INTERFILE  :=\n\
         name of data file := {data_file}\n\
         !GENERAL DATA :=\n\
         !GENERAL IMAGE DATA :=\n\
         !type of data := PET\n\
         imagedata byte order := LITTLEENDIAN\n\
         !PET STUDY (General) :=\n\
         !PET data type := Image\n\
         process status := Reconstructed\n\
         !number format := float\n\
         !number of bytes per pixel := 4\n\
         number of dimensions := 3\n\
         matrix axis label [1] := x\n\
         !matrix size [1] := {n}\n\
         scaling factor (mm/pixel) [1] := {p}\n\
         matrix axis label [2] := y\n\
         !matrix size [2] := {n}\n\
         scaling factor (mm/pixel) [2] := {p}\n\
         matrix axis label [3] := z\n\
         !matrix size [3] := {k}\n\
         scaling factor (mm/pixel) [3] := {s}\n\
         first pixel offset (mm) [1] := {o}\n\
         first pixel offset (mm) [2] := {o}\n\
         first pixel offset (mm) [3] := 0\n\
         number of time frames := 1\n\
         !END OF INTERFILE :=\n",
        n = v.n,
        k = v.slices,
        p = v.pixel_mm,
        s = v.slice_mm,
        o = -c,
    )
}

/// Writes `hv` and its data file (the same name with extension `.v`).
pub fn write(hv: &Path, v: &Volume) -> Result<(), ImageError> {
    let data = hv.with_extension("v");
    let name = data
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bytes: Vec<u8> = mirror_rows(v.n, &v.data)
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(&data, bytes)?;
    std::fs::write(hv, header(v, &name))?;
    Ok(())
}

/// The slices of `data` (`n x n` each) mirrored about the centre row `n / 2`: row `r` goes
/// to row `(2 (n / 2) - r) mod n`, which maps offhost's rows to STIR's and back (`n - 1 - r`
/// for an odd `n`; for an even `n`, rows 0 and `n / 2` stay).
pub(crate) fn mirror_rows(n: usize, data: &[f32]) -> Vec<f32> {
    let centre2 = 2 * (n / 2);
    data.chunks(n * n)
        .flat_map(|s| (0..n).flat_map(move |r| &s[(centre2 + n - r) % n * n..][..n]))
        .copied()
        .collect()
}

fn bad(line: usize, what: String) -> FormatError {
    FormatError::Interfile { line, what }
}

/// Reads an Interfile image (`float` voxels); the volume's `n` is the x size, which must equal
/// the y size.
pub fn read(hv: &Path) -> Result<Volume, FormatError> {
    let map = crate::interfile::Keys::parse(&crate::interfile::read_header(hv)?);
    if !map.contains_key("interfile") {
        return Err(bad(
            1,
            "not an Interfile header (no \"!INTERFILE\" key)".into(),
        ));
    }
    let get = |key: &str| map.key(key);
    let num = |key: &str| map.num(key);
    let size = |key: &str| -> Result<usize, FormatError> {
        let v = num(key)?;
        if v < 1.0 || v.fract() != 0.0 || v > 65536.0 {
            return Err(bad(
                get(key)?.0,
                format!("{key:?} must be 1..=65536, got {v}"),
            ));
        }
        Ok(v as usize)
    };
    let fmt = get("number format")?.1.to_lowercase();
    if fmt != "float" || num("number of bytes per pixel")? != 4.0 {
        return Err(bad(
            get("number format")?.0,
            format!("number format {fmt:?}: only 4-byte float images are read"),
        ));
    }
    if num("number of dimensions")? != 3.0 {
        return Err(bad(
            get("number of dimensions")?.0,
            "only 3-dimensional images are read".into(),
        ));
    }
    let big = map
        .get("imagedata byte order")
        .is_some_and(|x| x.1.eq_ignore_ascii_case("bigendian"));
    let (nx, ny, nz) = (
        size("matrix size[1]")?,
        size("matrix size[2]")?,
        size("matrix size[3]")?,
    );
    if nx != ny {
        return Err(bad(
            get("matrix size[2]")?.0,
            format!("{nx} x {ny} voxels a slice: only square slices are read"),
        ));
    }
    let px = num("scaling factor (mm/pixel)[1]")?;
    let sz = num("scaling factor (mm/pixel)[3]")?;
    if !(px > 0.0 && sz > 0.0) {
        return Err(bad(
            0,
            format!("voxel sizes {px} x {sz} mm must be positive"),
        ));
    }
    let voxels = (nx * ny) as u64 * nz as u64;
    if voxels > MAX_VOXELS {
        return Err(bad(
            0,
            format!("{voxels} voxels exceed the limit of {MAX_VOXELS}"),
        ));
    }
    let offset = match map.get("data offset in bytes[1]") {
        Some(_) => num("data offset in bytes[1]")?.max(0.0) as u64,
        None => 0,
    };
    let data = hv
        .parent()
        .unwrap_or(Path::new(""))
        .join(&get("name of data file")?.1);
    let mut file = std::fs::File::open(&data).map_err(|e| {
        FormatError::Io(std::io::Error::new(
            e.kind(),
            format!("data file {}: {e}", data.display()),
        ))
    })?;
    let len = file.metadata()?.len();
    let need = voxels * 4;
    if len < offset.saturating_add(need) {
        return Err(FormatError::Truncated {
            what: "image data",
            offset: offset.min(len),
            have: len.saturating_sub(offset) as usize,
            need: need as usize,
        });
    }
    // Only the voxels the header declares, however long the file.
    let mut raw = vec![0u8; need as usize];
    file.seek(std::io::SeekFrom::Start(offset))?;
    file.read_exact(&mut raw)?;
    let data: Vec<f32> = raw
        .chunks_exact(4)
        .map(|c| {
            let b: [u8; 4] = c.try_into().expect("4 bytes");
            if big {
                f32::from_be_bytes(b)
            } else {
                f32::from_le_bytes(b)
            }
        })
        .collect();
    Ok(Volume {
        data: mirror_rows(nx, &data),
        n: nx,
        slices: nz,
        pixel_mm: px,
        slice_mm: sz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_short_data() {
        let v = Volume {
            n: 3,
            slices: 2,
            pixel_mm: 2.5,
            slice_mm: 3.0,
            data: (0..18).map(|i| i as f32 * 0.5).collect(),
        };
        let dir = tempfile::tempdir().unwrap();
        let hv = dir.path().join("img.hv");
        write(&hv, &v).unwrap();
        assert_eq!(read(&hv).unwrap(), v);
        // Row 0 (+y) is the file's last row of its slice.
        let raw = std::fs::read(hv.with_extension("v")).unwrap();
        assert_eq!(f32::from_le_bytes(raw[24..28].try_into().unwrap()), 0.0);
        assert_eq!(f32::from_le_bytes(raw[0..4].try_into().unwrap()), 3.0);
        let t = std::fs::read_to_string(&hv).unwrap();
        assert!(t.contains("name of data file := img.v"), "{t}");
        std::fs::write(hv.with_extension("v"), [0u8; 70]).unwrap();
        let e = read(&hv).unwrap_err().to_string();
        assert!(
            e.contains("truncated image data") && e.contains("70 of 72"),
            "{e}"
        );
        std::fs::write(
            &hv,
            t.replace("!matrix size [3] := 2", "!matrix size [3] := 0"),
        )
        .unwrap();
        let e = read(&hv).unwrap_err().to_string();
        assert!(e.contains("line 20") && e.contains("1..=65536"), "{e}");
    }

    /// An even grid: each row of the file is at STIR's `y = R - n / 2` voxels, and holds
    /// offhost's row at that `y` (`y = n / 2 - r`); the one row the grids do not share is
    /// the file's first.
    #[test]
    fn rows_of_an_even_grid_are_where_stir_puts_them() {
        let n = 4;
        // Every voxel holds its own y in voxels (offhost's row r is at y = 2 - r).
        let data = (0..n * n).map(|i| 2.0 - (i / n) as f32).collect();
        let v = Volume {
            n,
            slices: 1,
            pixel_mm: 1.0,
            slice_mm: 1.0,
            data,
        };
        let dir = tempfile::tempdir().unwrap();
        let hv = dir.path().join("even.hv");
        write(&hv, &v).unwrap();
        let raw = std::fs::read(hv.with_extension("v")).unwrap();
        let y_of_file_row =
            |r: usize| f32::from_le_bytes(raw[4 * n * r..][..4].try_into().unwrap());
        for r in 1..n {
            assert_eq!(y_of_file_row(r), r as f32 - 2.0, "file row {r}");
        }
        // offhost's y = +2 row, which STIR's grid lacks, stands in STIR's y = -2 row.
        assert_eq!(y_of_file_row(0), 2.0);
        assert!(header(&v, "even.v").contains("first pixel offset (mm) [2] := -2"));
        assert_eq!(read(&hv).unwrap(), v);
    }
}
