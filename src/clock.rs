//! The wall clock, read in one place: a leaf every layer may use.

/// Unix seconds now (0 if the clock is before 1970): the zone's serial and the sources'
/// timestamps.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
