//! The page, built into the binary: nothing is fetched from anywhere else.

/// `GET /`.
pub(crate) const HTML: &str = include_str!("page/index.html");
/// `GET /view.js`: draws the graph, lays it out, applies the pushed changes.
pub(crate) const JS: &str = include_str!("page/view.js");
/// `GET /view.css`.
pub(crate) const CSS: &str = include_str!("page/view.css");
