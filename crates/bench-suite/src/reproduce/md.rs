//! Markdown pieces of the reproduction report.

use std::fmt::Write as _;

/// A markdown table.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column heads.
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders the table.
    pub fn render(&self) -> String {
        let mut out = format!("| {} |\n|", self.head.join(" | "));
        for _ in &self.head {
            out.push_str("---:|");
        }
        out.push('\n');
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out
    }
}

/// Bytes per second with thousands separators, as the seed tables print them.
pub fn bps(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A fraction as a percentage with one decimal.
pub fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}", 100.0 * x))
}

/// A ratio with two decimals.
pub fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".into()
    }
}

/// One checked finding.
pub struct Finding {
    /// Which seed and where.
    pub source: &'static str,
    /// The finding, in our words.
    pub claim: String,
    /// The seed's figure.
    pub seed: String,
    /// Today's figure.
    pub here: String,
    /// Whether it holds here: "yes", "no" or "partly".
    pub holds: &'static str,
}

/// The findings table.
pub fn findings(list: &[Finding]) -> String {
    let mut t = Table::new(&[
        "#",
        "source",
        "finding",
        "seed",
        "this machine",
        "holds here?",
    ]);
    for (i, f) in list.iter().enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            f.source.into(),
            f.claim.clone(),
            f.seed.clone(),
            f.here.clone(),
            f.holds.into(),
        ]);
    }
    t.render()
}
