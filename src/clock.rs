//! The wall clock, read in one place, and durations as flags spell them: a leaf every layer
//! may use.

use std::time::Duration;

/// Unix seconds now (0 if the clock is before 1970): the zone's serial and the sources'
/// timestamps.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `50us`, `250ms`, `5s`, `2m`, or plain seconds; above zero.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    match parse_duration_or_zero(s)? {
        d if d.is_zero() => Err("a duration must be above zero".into()),
        d => Ok(d),
    }
}

/// As [`parse_duration`], and `0` (or `0s`, …) for none. Plain digits are seconds; anything
/// else is `humantime`'s syntax (`50us`, `250ms`, `5s`, `2m`, `1h`, `1m30s`).
pub fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| format!("{s:?} is too many seconds"));
    }
    humantime::parse_duration(s).map_err(|e| match e {
        humantime::DurationError::UnknownUnit { unit, .. } => {
            format!("{s:?} has an unknown unit {unit:?} (use us, ms, s, m or h)")
        }
        _ => format!("{s:?} is not a duration like 500ms, 5s or 2m"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("5x").unwrap_err().contains("unit"));
        assert!(parse_duration("x").is_err());
        assert_eq!(parse_duration("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("5s"), Ok(Duration::from_secs(5)));
        assert!(parse_duration_or_zero("0q").unwrap_err().contains("unit"));
        assert!(parse_duration_or_zero("-1").is_err());
    }
}
