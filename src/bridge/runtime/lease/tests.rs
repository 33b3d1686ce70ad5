use super::*;

const DURATION: Duration = Duration::from_secs(15);

fn held(holder: &str, renewed: &str) -> Record {
    Record {
        holder: Some(holder.into()),
        renewed: Some(renewed.into()),
        acquired: Some("2026-12-05T00:00:00Z".into()),
        transitions: 1,
        duration: Some(DURATION),
    }
}

/// Replica `b` reads the Lease at each of `reads` (seconds from `t0`, and the record then);
/// its decisions.
fn reads(reads: &[(u64, Option<Record>)]) -> Vec<Decision> {
    let t0 = Instant::now();
    let mut observed = None;
    reads
        .iter()
        .map(|(s, r)| {
            let now = t0 + Duration::from_secs(*s);
            decide("b", r.as_ref(), &mut observed, now, DURATION)
        })
        .collect()
}

#[test]
fn none_is_created_and_ones_own_is_renewed() {
    assert_eq!(reads(&[(0, None)]), [Decision::Create]);
    assert_eq!(
        reads(&[(0, Some(held("b", "2026-12-05T00:00:00Z")))]),
        [Decision::Renew]
    );
}

/// The holder's clock is an hour behind this replica's: its renewTime is always an hour
/// old as read here, yet while it renews it keeps the Lease.
#[test]
fn a_holder_whose_clock_is_behind_keeps_the_lease_while_it_renews() {
    let d = reads(&[
        (0, Some(held("a", "2026-12-04T23:00:00Z"))),
        (10, Some(held("a", "2026-12-04T23:00:10Z"))),
        (20, Some(held("a", "2026-12-04T23:00:20Z"))),
        (30, Some(held("a", "2026-12-04T23:00:30Z"))),
    ]);
    assert_eq!(d, [Decision::Follow; 4]);
}

/// The holder's clock is an hour ahead: its renewTime looks valid here for an hour, yet
/// once its renewals stop the Lease is taken after its duration, not after that hour.
#[test]
fn a_holder_whose_clock_is_ahead_loses_the_lease_when_it_stops_renewing() {
    let stale = held("a", "2026-12-05T01:00:00Z");
    let d = reads(&[
        (0, Some(stale.clone())),
        (10, Some(stale.clone())),
        (14, Some(stale.clone())),
        (15, Some(stale)),
    ]);
    assert_eq!(
        d,
        [
            Decision::Follow,
            Decision::Follow,
            Decision::Follow,
            Decision::Acquire
        ]
    );
}

/// Expiry counts from when this replica first saw the record, not from its renewTime: a
/// replica that starts after the holder died still waits a whole duration.
#[test]
fn a_replica_that_just_started_waits_a_whole_duration() {
    let dead = held("a", "2026-12-01T00:00:00Z");
    let d = reads(&[(100, Some(dead.clone())), (114, Some(dead.clone()))]);
    assert_eq!(d, [Decision::Follow, Decision::Follow]);
    assert_eq!(
        reads(&[(100, Some(dead.clone())), (115, Some(dead))]),
        [Decision::Follow, Decision::Acquire]
    );
}

/// A holder that writes a longer duration is given it.
#[test]
fn the_holders_own_duration_counts() {
    let long = Record {
        duration: Some(Duration::from_secs(60)),
        ..held("a", "2026-12-05T00:00:00Z")
    };
    let d = reads(&[(0, Some(long.clone())), (59, Some(long.clone()))]);
    assert_eq!(d, [Decision::Follow, Decision::Follow]);
    assert_eq!(
        reads(&[(0, Some(long.clone())), (60, Some(long))])[1],
        Decision::Acquire
    );
}

/// A holder that gives the Lease up on shutdown (no holder) is taken over at once.
#[test]
fn a_lease_given_up_is_taken_at_once() {
    let given_up = Record {
        holder: None,
        renewed: None,
        ..held("a", "2026-12-05T00:00:00Z")
    };
    let d = reads(&[(0, Some(held("a", "x"))), (1, Some(given_up))]);
    assert_eq!(d, [Decision::Follow, Decision::Acquire]);
}

/// A Lease deleted under the holder is created again.
#[test]
fn a_deleted_lease_is_created_again() {
    let d = reads(&[(0, Some(held("a", "x"))), (1, None)]);
    assert_eq!(d, [Decision::Follow, Decision::Create]);
}

/// A new holder (a third replica took over) restarts the count even if its renewTime is
/// the same text.
#[test]
fn a_change_of_holder_is_a_change() {
    let d = reads(&[
        (0, Some(held("a", "x"))),
        (14, Some(held("c", "x"))),
        (28, Some(held("c", "x"))),
        (29, Some(held("c", "x"))),
    ]);
    assert_eq!(
        d,
        [
            Decision::Follow,
            Decision::Follow,
            Decision::Follow,
            Decision::Acquire
        ]
    );
}
