//! One writer at a time: the replicas of the bridge share a `coordination.k8s.io/v1` Lease, and
//! only its holder writes. The others keep their watches warm and take the Lease over when its
//! holder stops renewing it (or gives it up on shutdown).
//!
//! As client-go's leader election (`tools/leaderelection`, `tryAcquireOrRenew`) does, expiry is
//! judged by this replica's own monotonic clock from when it last saw the Lease's record
//! *change*, never from the `renewTime` another node wrote: clocks that disagree between nodes
//! cannot make two leaders. Every write goes through the Lease's resourceVersion, so two
//! replicas cannot both win a race. The decision is [`decide`], a pure function of what was
//! observed and when.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How the Lease is held.
#[derive(Debug, Clone)]
pub struct Config {
    pub namespace: String,
    pub name: String,
    /// This replica's name in the Lease (`holderIdentity`).
    pub identity: String,
    /// How long a holder's renewal counts; another replica takes over after it.
    pub duration: Duration,
    /// How often the holder renews (and the others look).
    pub renew: Duration,
}

/// What decides who holds the Lease: its holder and the record's fields that change with each
/// renewal. Two reads with equal records saw no renewal in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub holder: Option<String>,
    /// `renewTime` and `acquireTime` as written (compared, never read as a clock).
    pub renewed: Option<String>,
    pub acquired: Option<String>,
    pub transitions: i32,
    /// `leaseDurationSeconds`, as the holder wrote it.
    pub duration: Option<Duration>,
}

impl Record {
    pub fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        let time = |t: Option<MicroTime>| t.map(|t| t.0.to_string());
        Record {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renewed: time(spec.renew_time),
            acquired: time(spec.acquire_time),
            transitions: spec.lease_transitions.unwrap_or(0),
            duration: spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
        }
    }
}

/// The record this replica last read, and when (by its own clock) it first read it so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub record: Record,
    pub since: Instant,
}

/// What to do after one read of the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// There is none: create it, held by this replica.
    Create,
    /// It is free (given up, or its holder's renewals stopped): take it.
    Acquire,
    /// This replica holds it: renew it.
    Renew,
    /// Another replica holds it and renewed it within its duration, as seen here.
    Follow,
}

/// The decision of replica `identity` on reading `current` at `now`, given what it observed
/// before (`observed`, updated here). A holder counts as renewing until `duration` (its own
/// `leaseDurationSeconds`, else `default`) has passed on this replica's clock since the record
/// last changed: what time the holder's clock wrote is never compared with this one's.
pub fn decide(
    identity: &str,
    current: Option<&Record>,
    observed: &mut Option<Observed>,
    now: Instant,
    default: Duration,
) -> Decision {
    let Some(current) = current else {
        *observed = None;
        return Decision::Create;
    };
    let since = match observed {
        Some(o) if o.record == *current => o.since,
        _ => now,
    };
    *observed = Some(Observed {
        record: current.clone(),
        since,
    });
    match current.holder.as_deref() {
        Some(h) if h == identity => Decision::Renew,
        None => Decision::Acquire,
        Some(_) if now < since + current.duration.unwrap_or(default) => Decision::Follow,
        Some(_) => Decision::Acquire,
    }
}

/// How often a replica that does not hold the Lease reads it, at most: one GET each.
const FOLLOWER_LOOK: Duration = Duration::from_millis(500);

/// Holds the Lease whenever it can until `shutdown`, then gives it up if held. `leading` says
/// whether this replica holds it now (each change sent once).
pub async fn hold(
    client: kube::Client,
    config: Config,
    leading: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut said_error = false;
    let mut observed = None;
    loop {
        let held = match attempt(&api, &config, &mut observed).await {
            Ok(held) => {
                said_error = false;
                held
            }
            Err(e) => {
                if !said_error {
                    warn!(lease = %format!("{}/{}", config.namespace, config.name), error = %e, "cannot read or renew the Lease");
                    said_error = true;
                }
                // Without a renewal the Lease is as good as lost: stop writing before another
                // replica may take it.
                false
            }
        };
        if super::runner::set(&leading, held) {
            info!(identity = %config.identity, "{}", if held { "leading: this replica writes" } else { "not leading: another replica writes" });
        }
        // A follower looks more often than the holder renews: it counts a holder's hold from
        // when it sees a renewal, and takes over at its first look after the hold ran out,
        // each at most FOLLOWER_LOOK late, so within the duration and a second of the
        // holder's last renewal.
        let next = match held {
            true => config.renew,
            false => config.renew.min(FOLLOWER_LOOK),
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(next) => {}
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        if let Err(e) = release(&api, &config).await {
            warn!(error = %e, "cannot give up the Lease; another replica takes it when it expires");
        }
    }
}

/// One look at the Lease, and what [`decide`] says done; whether this replica holds it now.
async fn attempt(
    api: &Api<Lease>,
    config: &Config,
    observed: &mut Option<Observed>,
) -> Result<bool, kube::Error> {
    let lease = api.get_opt(&config.name).await?;
    let record = lease.as_ref().map(Record::of);
    let decision = decide(
        &config.identity,
        record.as_ref(),
        observed,
        Instant::now(),
        config.duration,
    );
    // The times written are for people reading the Lease; no replica judges by them.
    let now = MicroTime(Timestamp::now());
    let seconds = i32::try_from(config.duration.as_secs()).unwrap_or(i32::MAX);
    let (mut lease, create) = match (decision, lease) {
        (Decision::Follow, _) => return Ok(false),
        (Decision::Create, _) | (_, None) => {
            let metadata = ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..Default::default()
            };
            (
                Lease {
                    metadata,
                    spec: None,
                },
                true,
            )
        }
        (_, Some(lease)) => (lease, false),
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if create || decision == Decision::Acquire {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(now.clone());
        let before = spec.lease_transitions.map(|n| n + 1);
        spec.lease_transitions = Some(if create { 0 } else { before.unwrap_or(1) });
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(seconds);
    // A create fails if another replica created the Lease first; a replace, by the
    // resourceVersion read above, if anyone changed it meanwhile.
    let pp = PostParams::default();
    let written = match create {
        true => api.create(&pp, &lease).await,
        false => api.replace(&config.name, &pp, &lease).await,
    };
    match written {
        Ok(l) => Ok(won(observed, &l)),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// This replica wrote `lease`: what it observes from now on. Always true (it holds the Lease).
fn won(observed: &mut Option<Observed>, lease: &Lease) -> bool {
    *observed = Some(Observed {
        record: Record::of(lease),
        since: Instant::now(),
    });
    true
}

/// Gives the Lease up, so another replica takes it at its next look instead of after it expires.
async fn release(api: &Api<Lease>, config: &Config) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(&config.identity) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = None;
    api.replace(&config.name, &PostParams::default(), &lease)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests;
