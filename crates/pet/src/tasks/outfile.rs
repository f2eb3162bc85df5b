//! Where a task writes a final sinogram: STIR's Interfile projection data or `OHSINO01`.

use offhost_engine::{ArgError, Args, Build, TaskError, WriteFile};

use crate::projdata;
use crate::sinofile::{self, SinoFlags};
use crate::sinogram::Sinogram;

/// The file the final sinogram goes to: STIR's Interfile projection data (header and data
/// file) or an `OHSINO01` file.
pub(super) enum OutFile {
    Interfile {
        header: WriteFile,
        data: WriteFile,
        data_name: String,
    },
    Sino(WriteFile),
}

impl OutFile {
    pub(super) fn write(&self, sino: &Sinogram, flags: SinoFlags) -> Result<(), TaskError> {
        fn io(f: &WriteFile) -> impl FnOnce(std::io::Error) -> TaskError + '_ {
            move |e| TaskError::io(format!("write {}", f.path()), e)
        }
        match self {
            OutFile::Interfile {
                header,
                data,
                data_name,
            } => {
                let mut d = std::io::BufWriter::new(data.create().map_err(io(data))?);
                let mut h = header.create().map_err(io(header))?;
                projdata::write_to(&mut h, &mut d, data_name, sino, flags).map_err(io(header))
            }
            OutFile::Sino(f) => {
                use std::io::Write;
                f.create()
                    .and_then(|mut w| w.write_all(&sinofile::encode(sino, flags)))
                    .map_err(io(f))
            }
        }
    }

    /// The file named by `out=` (`FILE.hs`: Interfile, with `FILE.s` beside it; any other
    /// name: `OHSINO01`), created beneath the engine's files; `None` without `out=`.
    pub(super) fn from_arg(a: &Args, b: &mut Build<'_>) -> Result<Option<OutFile>, ArgError> {
        let Some(path) = a.get("out") else {
            return Ok(None);
        };
        let create = |p: &str| b.files().create(p).map_err(|e| e.arg("out"));
        if !projdata::is_header(std::path::Path::new(path)) {
            return Ok(Some(OutFile::Sino(create(path)?)));
        }
        let dp = projdata::data_path(std::path::Path::new(path));
        let (Some(dp), Some(name)) = (dp.to_str(), dp.file_name().and_then(|n| n.to_str())) else {
            return Err(ArgError::new(
                "out",
                format!("out={path}: not a usable file name"),
            ));
        };
        Ok(Some(OutFile::Interfile {
            header: create(path)?,
            data: create(dp)?,
            data_name: name.to_owned(),
        }))
    }
}
