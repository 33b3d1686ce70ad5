//! Whether a serving thread waits after it has answered, so that the queries arriving meanwhile
//! are answered together in one wake-up (`--xdp-coalesce`, `--tcp-coalesce`).

use std::time::Duration;

/// How a serving thread coalesces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coalescing {
    /// Never: each wake-up answers what has come.
    Off,
    /// After every wake-up that answered something (for XDP: every batch that did not fill).
    Always(Duration),
    /// Only while the load makes the wait gather several queries: as a network card's adaptive
    /// interrupt moderation. The duration is the wait (XDP) or the most it may be (TCP).
    Adaptive(Duration),
}

impl std::fmt::Display for Coalescing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Coalescing::Off => f.write_str("off"),
            Coalescing::Always(d) => write!(f, "{}us", d.as_micros()),
            Coalescing::Adaptive(d) => write!(f, "adaptive, {}us", d.as_micros()),
        }
    }
}

/// The most a flag may ask a thread to wait: past it, the latency is a client's problem.
pub const MOST: Duration = Duration::from_millis(1);

/// A coalescing flag: `auto` (adaptive with `auto`), `0` (off) or a duration up to 1 ms, such
/// as `50us` (always).
pub fn parse(s: &str, auto: Duration) -> Result<Coalescing, String> {
    match s.trim() {
        "auto" => return Ok(Coalescing::Adaptive(auto)),
        "0" => return Ok(Coalescing::Off),
        _ => {}
    }
    let d = crate::clock::parse_duration(s).map_err(|e| format!("{e}, or auto, or 0"))?;
    if d > MOST {
        return Err(format!("{s:?} is more than 1ms"));
    }
    Ok(Coalescing::Always(d))
}
