//! One writer at a time: the replicas of the bridge share a `coordination.k8s.io/v1` Lease, and
//! only its holder writes. The others keep their watches warm and take the Lease over when its
//! holder stops renewing it (or gives it up on shutdown), as client-go's leader election does:
//! every change goes through the Lease's resourceVersion, so two replicas cannot both win.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
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

/// Whether this replica holds the Lease now.
#[derive(Debug, Clone, Default)]
pub struct Leading(Arc<AtomicBool>);

impl Leading {
    pub fn now(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self, on: bool) {
        self.0.store(on, Ordering::Release);
    }
}

/// Holds the Lease whenever it can until `shutdown`, then gives it up if held. `changed` is
/// called with each change of leadership.
pub async fn hold(
    client: kube::Client,
    config: Config,
    leading: Leading,
    changed: impl Fn(bool),
    shutdown: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut said_error = false;
    loop {
        let held = match attempt(&api, &config).await {
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
        if held != leading.now() {
            leading.set(held);
            changed(held);
            info!(identity = %config.identity, "{}", if held { "leading: this replica writes" } else { "not leading: another replica writes" });
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(config.renew) => {}
        }
    }
    if leading.now() {
        leading.set(false);
        if let Err(e) = release(&api, &config).await {
            warn!(error = %e, "cannot give up the Lease; another replica takes it when it expires");
        }
    }
}

fn micro(t: Timestamp) -> MicroTime {
    MicroTime(t)
}

/// One look at the Lease: takes it (absent, expired or given up) or renews it (held);
/// whether this replica holds it now.
async fn attempt(api: &Api<Lease>, config: &Config) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let seconds = i32::try_from(config.duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(micro(now)),
                renew_time: Some(micro(now)),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            // Another replica created it first.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let mine = holder == config.identity;
    if !mine && !holder.is_empty() {
        let renewed = spec.renew_time.as_ref().map(|t| t.0);
        let lasts =
            SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(seconds).into());
        if renewed.is_some_and(|r| r + lasts > now) {
            return Ok(false);
        }
    }
    if !mine {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(micro(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(micro(now));
    spec.lease_duration_seconds = Some(seconds);
    // The resourceVersion read above makes this fail if anyone changed the Lease meanwhile.
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
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
