//! `recon`: reconstructs the last sinogram received and writes a PNG; with `period=`, live
//! images as snapshots come ([`crate::preview`]), out as PNGs on its output and to `live=`.
//!
//! A live image goes out `hold=` after its snapshot came (half the period unless told
//! otherwise), or a period after the image before it if that is sooner, and at once when it
//! took longer. The snapshots come about a period apart, but an image takes as long as the
//! machine lets it: 0.14-0.36 s at one level while 120 M events/s were histogrammed beside
//! it, so images sent when made came up to 1.3 periods apart. Held to the time the level is
//! chosen to fit, they go out as evenly as the snapshots came, each that much older; and a
//! snapshot that came late (a merge waiting for an engine's share) still gives an image a
//! period after the one before, if it is ready by then. The task is woken for it by its
//! alarm (`Context::wake_at`).

use std::time::{Duration, Instant};

use offhost_engine::{
    ArgError, Args, Buffer, Build, Context, Get, Registry, Status, Task, TaskError, TaskInfo,
    WriteFile,
};

use crate::preview::Preview;
use crate::recon::{self, Method};
use crate::sinofile;

/// Most MLEM iterations a `recon` task runs.
const MAX_ITERATIONS: usize = 10_000;

struct Recon {
    method: Method,
    png: WriteFile,
    columns: usize,
    latest: Option<Buffer>,
    received: u64,
    summary: Option<String>,
    /// When the last image for a live view was made.
    shown_at: Option<Instant>,
    /// Live images at a period (`period=`), and where each goes.
    preview: Option<Preview>,
    live: Option<WriteFile>,
    /// The newest snapshot has had no live image yet.
    fresh: bool,
    /// When the newest snapshot came.
    got_at: Option<Instant>,
    /// How long after its snapshot came a live image goes out (`hold=`).
    hold: Duration,
    /// The live images' period (`period=`).
    period: Duration,
    /// When the last live image went out.
    sent_at: Option<Instant>,
    /// A live image made and not yet gone out.
    held: Option<Held>,
    /// The final image at the live images' level (`final=live`), not a full reconstruction.
    final_live: bool,
}

/// A live image waiting for its time.
struct Held {
    due: Instant,
    vol: crate::Volume,
    png: Vec<u8>,
}

/// The least time between two images made for a live view while the scan goes on.
const LIVE_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// The `tEXt` keyword of an image's PNG that gives the net counts of the sinogram it was
/// made from (a host that knows what it sent can tell how old the image's data is).
pub const NET_COUNTS_KEY: &str = "offhost-net-counts";

/// A volume made from a sinogram of `net` counts as PNG bytes.
fn png_bytes(vol: &crate::Volume, columns: usize, net: i64) -> Result<Vec<u8>, TaskError> {
    let mut out = Vec::new();
    vol.write_png_tagged(&mut out, columns, &[(NET_COUNTS_KEY, net.to_string())])
        .map_err(|e| TaskError::Failed(format!("PNG: {e}")))?;
    Ok(out)
}

impl Recon {
    /// With `period=`: a live image of the newest snapshot, when one came since the last
    /// image, held until `hold` after the snapshot came ([`Self::release`]). The snapshots
    /// come about a period apart (the histograms' and the merge's `period=`); each one is
    /// imaged when it comes.
    fn live_image(&mut self) -> Result<(), TaskError> {
        let (Some(preview), Some(buf), true) = (self.preview.as_mut(), &self.latest, self.fresh)
        else {
            return Ok(());
        };
        let (sino, flags) =
            sinofile::decode(buf).map_err(|e| TaskError::BadInput(format!("sinogram: {e}")))?;
        let vol = preview.image(&sino, flags.detector_pairs);
        self.fresh = false;
        let png = png_bytes(&vol, self.columns, sino.total())?;
        let mut due = self.got_at.unwrap_or_else(Instant::now) + self.hold;
        if let Some(t) = self.sent_at {
            due = due.min(t + self.period);
        }
        self.held = Some(Held { due, vol, png });
        Ok(())
    }

    /// Sends the held live image once its time has come (or at once with `now`): shown,
    /// written to `live=` and put out; whether it went. Before then the task asks to be
    /// woken at it. The reader of a single put is woken when the turn ends, so a caller
    /// that sent one ends its turn before more work.
    fn release(&mut self, cx: &mut Context<'_>, now: bool) -> Result<bool, TaskError> {
        let Some(h) = self.held.take_if(|h| now || h.due <= Instant::now()) else {
            if let Some(h) = &self.held {
                cx.wake_at(h.due);
            }
            return Ok(false);
        };
        self.sent_at = Some(Instant::now());
        self.show(cx, &h.vol);
        if let Some(f) = &self.live {
            use std::io::Write;
            f.create()
                .and_then(|mut w| w.write_all(&h.png))
                .map_err(|e| TaskError::io(format!("write {}", f.path()), e))?;
        }
        if cx.outputs() > 0 {
            cx.put(0, Buffer::from_vec(h.png));
        }
        Ok(true)
    }

    /// While a live view watches: the newest snapshot reconstructed and shown, at most once
    /// per [`LIVE_PERIOD`].
    fn show_live(&mut self, cx: &Context<'_>) -> Result<(), TaskError> {
        if !cx.watched() || self.shown_at.is_some_and(|t| t.elapsed() < LIVE_PERIOD) {
            return Ok(());
        }
        let Some(buf) = &self.latest else {
            return Ok(());
        };
        let (sino, flags) =
            sinofile::decode(buf).map_err(|e| TaskError::BadInput(format!("sinogram: {e}")))?;
        let vol = recon::reconstruct(&sino, self.method, flags.detector_pairs);
        self.show(cx, &vol);
        Ok(())
    }

    fn show(&mut self, cx: &Context<'_>, vol: &crate::Volume) {
        if let Ok((width, _, pixels)) = vol.render(self.columns) {
            let height = pixels.len().checked_div(width).unwrap_or(0);
            let picture = offhost_engine::Picture {
                width,
                height,
                pixels,
            };
            // Refused only past the board's bounds: the image is then not shown.
            let _ = cx.show_picture("image", picture);
        }
        self.shown_at = Some(Instant::now());
    }

    fn reconstruct(&mut self, cx: &mut Context<'_>) -> Result<(), TaskError> {
        let Some(buf) = self.latest.take() else {
            return Err(TaskError::BadInput("no sinogram arrived".into()));
        };
        let (sino, flags) =
            sinofile::decode(&buf).map_err(|e| TaskError::BadInput(format!("sinogram: {e}")))?;
        let t = Instant::now();
        let (vol, how) = match (&mut self.preview, self.final_live) {
            (Some(p), true) => {
                let level = p.level();
                let vol = p.image(&sino, flags.detector_pairs);
                let how = format!("live level (mash {}, slabs of {})", level.mash, level.slab);
                (vol, how)
            }
            _ => {
                let vol = recon::reconstruct(&sino, self.method, flags.detector_pairs);
                (vol, format!("{:?}", self.method))
            }
        };
        let secs = t.elapsed().as_secs_f64();
        if cx.watched() {
            self.show(cx, &vol);
        }
        let f = self
            .png
            .create()
            .map_err(|e| TaskError::io(format!("create {}", self.png.path()), e))?;
        vol.write_png_to(f, self.columns)
            .map_err(|e| TaskError::Failed(format!("{}: {e}", self.png.path())))?;
        if cx.outputs() > 0 {
            cx.put(
                0,
                Buffer::from_vec(png_bytes(&vol, self.columns, sino.total())?),
            );
        }
        self.summary = Some(format!(
            "{how}: {} slices of {}x{} from {} net counts in {:.2} s -> {}",
            vol.slices,
            vol.n,
            vol.n,
            sino.total(),
            secs,
            self.png.path()
        ));
        Ok(())
    }
}

impl Task for Recon {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        loop {
            match cx.get(0) {
                // Keep only the newest snapshot: reconstruction follows the acquisition.
                Get::Buf(b) => {
                    self.received += 1;
                    self.latest = Some(b);
                    self.fresh = true;
                    self.got_at = Some(Instant::now());
                }
                Get::Empty => {
                    if self.preview.is_none() {
                        self.show_live(cx)?;
                        return Ok(Status::Blocked);
                    }
                    // A held image goes out when due, or at once when a newer snapshot
                    // is to be imaged (a hold longer than the snapshots' period); the
                    // turn ends with it, and the next images the newer one.
                    if self.release(cx, self.fresh)? {
                        return Ok(Status::Progress);
                    }
                    if self.held.is_none() {
                        self.live_image()?;
                        self.release(cx, false)?;
                    }
                    return Ok(Status::Blocked);
                }
                Get::Closed => {
                    // The held image goes out before the final one is made.
                    if self.release(cx, true)? {
                        return Ok(Status::Progress);
                    }
                    self.reconstruct(cx)?;
                    return Ok(Status::Done);
                }
            }
        }
    }

    fn report(&self) -> Option<String> {
        let live = match &self.preview {
            Some(p) => format!("; {}", p.describe()),
            None => String::new(),
        };
        Some(match &self.summary {
            Some(s) => format!("{} sinograms received{live}; {s}", self.received),
            None => format!("{} sinograms received{live}", self.received),
        })
    }
}

/// Most slices per row of the PNG (a row wider than the volume has slices is cut to them).
const MAX_COLUMNS: usize = 1024;

pub(super) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "recon",
            "reconstructs the last sinogram it receives (single-slice rebinning, then 2D FBP or MLEM) and writes a PNG of the slices and a maximum-intensity projection",
        )
        .arg("method", "fbp", "fbp, fbp-hann or mlem")
        .arg("iterations", "10", "MLEM iterations")
        .arg("columns", "8", "slices per row in the PNG")
        .required("png", "output PNG path")
        .optional("period", "make live images while the scan goes on, about this many seconds apart (0.05 to 3600): the finest that fits half the period; each goes out as a PNG")
        .optional("live", "write each live image to this PNG path (with period=)")
        .optional("hold", "send each live image this many seconds after its snapshot came (0 to 3600; at once if it took longer), so that images go out as evenly as the snapshots come (default: half the period, the time the image is made to fit; 0: as soon as made)")
        .arg("final", "full", "the final image: full (the method's reconstruction) or live (at the live images' level, with period=)")
        .outputs(0, 1),
        |a: &Args, b: &mut Build<'_>| {
            let method = match a.get("method").unwrap_or("fbp") {
                "fbp" => Method::Fbp,
                "fbp-hann" => Method::FbpHann,
                "mlem" => {
                    Method::Mlem(a.parse_in::<usize>("iterations", 1..=MAX_ITERATIONS)?)
                }
                other => {
                    return Err(ArgError::new(
                        "method",
                        format!("method={other}: expected fbp, fbp-hann or mlem"),
                    ))
                }
            };
            let period = a.seconds_in_opt("period", 0.05..=3600.0)?;
            let live = match (a.get("live"), period) {
                (None, _) => None,
                (Some(_), None) => {
                    return Err(ArgError::new("live", "live= needs period="));
                }
                (Some(p), Some(_)) => {
                    Some(b.files().create(p).map_err(|e| e.arg("live"))?)
                }
            };
            let hold = match (a.seconds_in_opt("hold", 0.0..=3600.0)?, period) {
                (Some(_), None) => return Err(ArgError::new("hold", "hold= needs period=")),
                (Some(h), Some(_)) => h,
                (None, p) => p.unwrap_or_default() / 2,
            };
            let final_live = match a.get("final").unwrap_or("full") {
                "full" => false,
                "live" if period.is_some() => true,
                "live" => return Err(ArgError::new("final", "final=live needs period=")),
                other => {
                    return Err(ArgError::new(
                        "final",
                        format!("final={other}: expected full or live"),
                    ))
                }
            };
            Ok(Box::new(Recon {
                method,
                png: b.files().create(a.required("png")?).map_err(|e| e.arg("png"))?,
                columns: a.parse_in::<usize>("columns", 1..=MAX_COLUMNS)?,
                latest: None,
                received: 0,
                summary: None,
                shown_at: None,
                preview: period.map(Preview::new),
                live,
                fresh: false,
                got_at: None,
                hold,
                period: period.unwrap_or_default(),
                sent_at: None,
                held: None,
                final_live,
            }))
        },
    );
}
