//! `offhost bench engine --peers` end to end: offhost, sox and GStreamer each run the telephony
//! chain on one input; offhost's output has the ideal converter's length and is within what
//! mu-law allows of it. No test asserts a timing.

mod common;

#[test]
fn bench_engine_peers_measures_offhost_sox_and_gst_on_one_input() {
    let tmp = tempfile::tempdir().unwrap();
    let v = common::json_in(
        tmp.path(),
        "bench engine --peers --audio-seconds 3 --peer-rounds 2",
    );
    assert_eq!(v["seconds"], 3, "{v}");
    assert_eq!(v["missing"].as_array().unwrap().len(), 0, "{v}");
    let rows = v["rows"].as_array().unwrap();
    let tools: Vec<&str> = rows.iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["offhost", "sox", "gst"], "{v}");
    for r in rows {
        assert_eq!(r["wall_s_rounds"].as_array().unwrap().len(), 2, "{r}");
        assert!(r["wall_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["cpu_s"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(r["speed_vs_sox"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["snr_gap_db"].as_f64().is_some(), "{r}");
    }
    // offhost and sox both give the ideal length, aligned in time: mu-law's ~38 dB.
    for r in &rows[..2] {
        assert_eq!(r["samples"], 24_000, "{r}");
        assert_eq!(r["expected_samples"], 24_000, "{r}");
        let snr = r["snr_db"].as_f64().unwrap();
        assert!(snr > 35.0, "{r}");
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
