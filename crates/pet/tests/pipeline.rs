//! The PET tasks run as engine pipelines.

mod common;

use offhost_engine::{EngineConfig, Pipeline};

fn run(text: &str) -> offhost_engine::Stats {
    let reg = offhost_pet::tasks::registry();
    let running = Pipeline::parse(text)
        .unwrap()
        .start(&reg, &EngineConfig::default())
        .unwrap();
    running.wait().unwrap()
}

fn report(stats: &offhost_engine::Stats, task: usize) -> String {
    stats.tasks[task].report.clone().unwrap_or_default()
}

#[test]
fn demo_pipeline_simulates_histograms_and_writes_a_png() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("pet.png");
    let text = format!(
        "pet-sim scanner=demo phantom=nema events=60000 seed=3 >ev:lm(8,64k)\n\
         energy-window lower=435 upper=650 <ev >win\n\
         sinogram scanner=demo snapshot=15000 <win >sino\n\
         recon method=fbp png={} <sino\n",
        png.display()
    );
    let st = run(&text);
    assert!(st.finished);
    let sim = report(&st, 0);
    let win = report(&st, 1);
    let hist = report(&st, 2);
    let rec = report(&st, 3);
    eprintln!("{sim}\n{win}\n{hist}\n{rec}");
    assert!(sim.starts_with("60000 events"), "{sim}");
    // The window's survivors are exactly what the sinogram task saw.
    let rejected: u64 = win
        .split(", ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rejected > 0);
    assert!(
        hist.starts_with(&format!("{} events", 60_000 - rejected)),
        "{hist}"
    );
    assert!(hist.contains("0 energy-rejected"), "{hist}");
    // 60000 - rejected >= 3 snapshots of 15000, plus the final sinogram.
    assert!(
        rec.starts_with("4 sinograms received") || rec.starts_with("5 sinograms received"),
        "{rec}"
    );
    let dec = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let reader = dec.read_info().unwrap();
    assert_eq!(reader.info().width, 8 * 128);
}

/// With a free list named on its output, the sinogram task sends every sinogram in a buffer
/// of it (the list bounds the sinograms in flight) and the image is the same as without.
#[test]
fn sinograms_go_out_in_the_free_list_named_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let text = |out: &str, png: &str| {
        format!(
            "pet-sim scanner=demo phantom=nema events=60000 seed=3 >ev:lm(8,64k)\n\
             energy-window lower=435 upper=650 <ev >win\n\
             sinogram scanner=demo snapshot=15000 <win >{out}\n\
             recon method=fbp png={} <sino\n",
            dir.path().join(png).display()
        )
    };
    let own = run(&text("sino", "own.png"));
    let listed = run(&text("sino:s(2,17M)", "listed.png"));
    let s = listed.pools.iter().find(|p| p.name == "s").unwrap();
    let received: u64 = report(&listed, 3)
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(received >= 4, "{}", report(&listed, 3));
    assert_eq!(s.allocs, received, "every sinogram in a buffer of s");
    assert!(own.pools.iter().all(|p| p.name != "s"));
    let png = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    assert!(png("own.png") == png("listed.png"), "the images differ");
}

#[test]
fn petlink_pipeline_histograms_the_mmr_file() {
    let data = common::petlink_dir().join("small_listmode_file.l");
    let text = format!(
        "petlink-read path={} >w:lmw(8,64k)\n\
         sinogram scanner=mmr format=petlink span=ssrb <w >sino\n\
         null <sino\n",
        data.display(),
    );
    let st = run(&text);
    assert_eq!(report(&st, 0), "254816 words read");
    let hist = report(&st, 1);
    assert!(
        hist.starts_with("254201 events (218881 prompts, 35320 delayeds)"),
        "{hist}"
    );
}

#[test]
fn corrupt_petlink_input_fails_the_pipeline_with_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let src = common::petlink_dir();
    let data = dir.path().join("cut.l");
    let mut bytes = std::fs::read(src.join("small_listmode_file.l")).unwrap();
    bytes.truncate(1001 * 4 + 2);
    std::fs::write(&data, bytes).unwrap();
    let text = format!(
        "petlink-read path={} header={} >w:lmw(8,64k)\n\
         sinogram scanner=mmr format=petlink span=ssrb <w\n",
        data.display(),
        src.join("PET_ACQ_small.l.hdr").display()
    );
    let reg = offhost_pet::tasks::registry();
    let err = Pipeline::parse(&text)
        .unwrap()
        .start(&reg, &EngineConfig::default())
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(err.to_string().contains("byte offset 4004"), "{err}");
}

/// The `sinogram` task's `out=FILE.hs`: the mMR file at span 11 through the engine, written as
/// STIR's Interfile projection data, reads back as the histogram of the file jobs.
#[test]
fn sinogram_task_writes_interfile_projection_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = common::petlink_dir().join("small_listmode_file.l");
    let hs = dir.path().join("mmr11.hs");
    let text = format!(
        "petlink-read path={} >w:lmw(8,64k)\n\
         sinogram scanner=mmr format=petlink span=11 out={} <w\n",
        data.display(),
        hs.display(),
    );
    run(&text);
    let (s, flags) = offhost_pet::projdata::read(&hs).unwrap();
    assert!(!flags.detector_pairs);
    assert_eq!(s.layout.total_sinograms(), 837);
    assert_eq!(s.total(), 218_881 - 35_320);
    let h = offhost_pet::PetlinkHeader::read(&common::petlink_dir().join("PET_ACQ_small.l.hdr"))
        .unwrap();
    let mut hist = offhost_pet::PetlinkHistogrammer::new(&h.scanner, 11).unwrap();
    let words = std::fs::read(&data).unwrap();
    let words: Vec<u32> = words
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    hist.add_words(&words);
    assert_eq!(s.data, hist.finish().0.data);
}

#[test]
fn live_images_go_out_the_hold_after_their_snapshot_came_or_a_period_after_the_last() {
    // Snapshots sent by hand into `recon period=1 hold=0.8`, at 0 s, 1 s and (late) 2.6 s:
    // the first two images come out no sooner than the hold after their snapshots (the
    // task is blocked with nothing to read by then: its alarm sends them), the third a
    // period after the second, sooner than the hold after its late snapshot; the final one
    // at the end.
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("final.png");
    let text = format!(
        "host-in name=in >s:s(3,17M)\n\
         recon method=fbp-hann period=1 hold=0.8 png={} <s >p\n\
         host-out name=out <p\n",
        png.display()
    );
    let reg = offhost_pet::tasks::registry();
    let mut running = Pipeline::parse(&text)
        .unwrap()
        .start(&reg, &EngineConfig::default())
        .unwrap();
    let (input, out) = (
        running.host_input("in").unwrap(),
        running.host_output("out").unwrap(),
    );
    let scanner = offhost_pet::Scanner::demo();
    let mut sino = offhost_pet::Sinogram::new(&scanner).unwrap();
    let flags = |last| offhost_pet::sinofile::SinoFlags {
        last,
        detector_pairs: true,
    };
    let start = Instant::now();
    let mut waited = Vec::new();
    for (i, at) in [0.0, 1.0, 2.6].into_iter().enumerate() {
        std::thread::sleep(Duration::from_secs_f64(at).saturating_sub(start.elapsed()));
        sino.data[i * 1000] += 50;
        let sent = Instant::now();
        input
            .send(offhost_pet::sinofile::encode(&sino, flags(false)))
            .unwrap();
        let Some(image) = out.recv_timeout(Duration::from_secs(30)).unwrap() else {
            panic!("live image {i} never came: {:?}", running.wait().err());
        };
        assert!(image.starts_with(b"\x89PNG"), "image {i} is not a PNG");
        waited.push(sent.elapsed().as_secs_f64());
    }
    // The second may go out up to the first snapshot's lateness sooner (a period after
    // the first image): 0.1 s allowed for the sending thread.
    assert!(waited[0] >= 0.8 && waited[1] >= 0.7, "{waited:?}");
    // Due 0.2 s after its snapshot; at most 0.5 s more to make it on a loaded machine.
    assert!(waited[2] < 0.7, "{waited:?}");
    input
        .send(offhost_pet::sinofile::encode(&sino, flags(true)))
        .unwrap();
    drop(input);
    let mut last = None;
    while let Some(b) = out.recv_timeout(Duration::from_secs(60)).unwrap() {
        last = Some(b);
    }
    assert!(
        last.is_some_and(|b| b.starts_with(b"\x89PNG")),
        "no final image"
    );
    running.wait().unwrap();
    assert!(png.exists());
}
