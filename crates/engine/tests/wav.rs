//! The `wav` source: samples come out as they lie in the file, and files it cannot read
//! correctly are refused with the reason.

use std::path::Path;

use offhost_engine::{EngineConfig, Pipeline, Registry, RunError};

/// Writes a stereo 16-bit WAV of `frames` frames with distinct samples.
fn write_wav(path: &Path, frames: u32, bits: u16) -> Vec<i32> {
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 44100,
        bits_per_sample: bits,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    let samples: Vec<i32> = (0..2 * frames as i32)
        .map(|i| (i * 37 % 65536) - 32768)
        .collect();
    for &s in &samples {
        if bits == 16 {
            w.write_sample(s as i16).unwrap();
        } else {
            w.write_sample(s).unwrap();
        }
    }
    w.finalize().unwrap();
    samples
}

/// Runs `wav path=IN` into `file path=OUT` (small buffers, so reads stop mid-file often).
fn copy(input: &Path, out: &Path) -> Result<Vec<u8>, RunError> {
    let text = format!(
        "wav path=\"{}\" >a:p(4,1000)\nfile path=\"{}\" <a\n",
        input.display(),
        out.display()
    );
    Pipeline::parse(&text)
        .unwrap()
        .start(&Registry::with_builtins(), &EngineConfig::default())
        .unwrap()
        .wait()?;
    Ok(std::fs::read(out).unwrap())
}

#[test]
fn samples_come_out_in_file_order() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.wav");
    let samples = write_wav(&input, 12_345, 16);
    let got = copy(&input, &d.path().join("out.raw")).unwrap();
    let want: Vec<u8> = samples
        .iter()
        .flat_map(|&s| (s as i16).to_le_bytes())
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "samples differ");
}

#[test]
fn a_truncated_file_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("cut.wav");
    write_wav(&input, 10_000, 16);
    let len = std::fs::metadata(&input).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .unwrap();
    f.set_len(len - 1001).unwrap();
    match copy(&input, &d.path().join("out.raw")) {
        Err(RunError::TaskFailed { task, message, .. }) => {
            assert_eq!(task, "wav");
            assert!(message.contains("cut.wav"), "{message}");
            assert!(message.contains("ends before its data chunk"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn samples_wider_than_16_bits_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("deep.wav");
    write_wav(&input, 100, 24);
    match copy(&input, &d.path().join("out.raw")) {
        Err(RunError::TaskFailed { message, .. }) => {
            assert!(
                message.contains("24-bit") && message.contains("only 16-bit"),
                "{message}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
