//! `offhost pet ...`: simulate, inspect, histogram and reconstruct PET list-mode data, and run
//! PET pipelines.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use offhost_pet::files::{self, ListFormat};

/// PET acquisition: list-mode files, sinograms, images.
#[derive(clap::Args, Debug)]
pub struct PetArgs {
    #[command(subcommand)]
    cmd: PetCmd,
}

#[derive(clap::Subcommand, Debug)]
enum PetCmd {
    /// Simulate an acquisition and write a list-mode file (offhost's, or PETSIRD: *.petsird).
    Sim(SimArgs),
    /// Count the words or events of a list-mode file.
    Stat(StatArgs),
    /// Histogram a list-mode file into a sinogram file (.hs: STIR Interfile, else OHSINO01).
    Hist(HistArgs),
    /// Reconstruct a sinogram file (2D FBP/MLEM, or 3D OSEM) into .hv, .nii or .png images.
    Recon(offhost_pet::recon3d::ReconJob),
    /// NEMA NU 2 contrast recovery and background variability of a NEMA IEC image (.hv).
    Nema(offhost_pet::recon3d::NemaJob),
    /// Convert PETLINK list mode into PETSIRD.
    Convert(files::ConvertJob),
    /// Replay a PETLINK file as a live scan: paced, split over engines, merged, imaged.
    Replay(offhost_live::ReplayJob),
}

#[derive(clap::Args, Debug)]
struct SimArgs {
    #[command(flatten)]
    job: files::SimJob,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct StatArgs {
    /// List-mode file.
    file: PathBuf,
    /// File format.
    #[arg(long, value_enum, default_value = "offhost")]
    format: ListFormat,
    /// PETLINK Interfile header (default: the .hdr beside the file that names it).
    #[arg(long)]
    header: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct HistArgs {
    #[command(flatten)]
    job: files::HistJob,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `offhost pet ...`.
pub fn run(args: PetArgs, registry: &offhost_engine::Registry) -> anyhow::Result<()> {
    match args.cmd {
        PetCmd::Sim(a) => {
            let job = a.job;
            let pb = bar(job.events, "simulating");
            let r = files::simulate(&job, |n| pb.inc(n));
            pb.finish_and_clear();
            let r = r?;
            print_out(&serde_json::to_value(&r)?, a.json, || r.text());
        }
        PetCmd::Stat(a) => {
            let (v, text) = files::stat(&a.file, a.format, a.header.as_deref())?;
            print_out(&v, a.json, || text);
        }
        PetCmd::Hist(a) => {
            let (v, text) = files::histogram(&a.job)?;
            print_out(&v, a.json, || text);
        }
        PetCmd::Convert(j) => println!("{}", files::convert(&j)?.1),
        PetCmd::Recon(job) => {
            let pb = bar(0, "reconstructing");
            let line = offhost_pet::recon3d::run(&job, &|k, n, what| {
                pb.set_length(n as u64);
                pb.set_position(k as u64);
                pb.set_message(what.to_string());
            });
            pb.finish_and_clear();
            println!("{}", line?);
        }
        PetCmd::Replay(job) => {
            let pb = bar(0, "replaying");
            let r = offhost_live::replay(&job, registry, &|sent, all| {
                pb.set_length(all);
                pb.set_position(sent);
            });
            pb.finish_and_clear();
            let r = r?;
            print_out(&serde_json::to_value(&r)?, job.json, || r.text());
            if let Some(f) = r.failure {
                anyhow::bail!("the scan failed: {f}");
            }
            if !r.replay.kept_rate {
                anyhow::bail!("the replay could not keep the rate asked for");
            }
        }
        PetCmd::Nema(job) => {
            let (v, text) = offhost_pet::recon3d::nema_file(&job)?;
            print_out(&v, job.json, || text);
        }
    }
    Ok(())
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({per_sec}, eta {eta})")
            .expect("valid template"),
    );
    pb.set_message(what.to_string());
    pb
}

fn print_out(v: &serde_json::Value, as_json: bool, text: impl FnOnce() -> String) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(v).expect("serialisable"));
    } else {
        println!("{}", text());
    }
}
