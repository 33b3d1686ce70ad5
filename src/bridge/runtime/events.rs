//! The bridge's Events (`events.k8s.io/v1`), written as kube-runtime's `Recorder` and
//! client-go's recorder write them: a repeat of an Event within [`SERIES_WINDOW`] (same type,
//! action, reason, reporter and object) adds to the first one's `series` instead of making a
//! new Event. What is remembered of each Event is only what a repeat needs (its object's name
//! and namespace, its count and time), not the whole Event as kube-runtime's `Recorder` keeps
//! it (docs/performance.md has what that held).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// How long after its last repeat an Event still takes repeats: kube-runtime's and client-go's
/// six minutes.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// How often what is older than [`SERIES_WINDOW`] is forgotten.
const PRUNE_EVERY: SignedDuration = SignedDuration::from_secs(30);

/// Whether an Event says something normal or wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Type {
    Normal,
    Warning,
}

/// An Event written, as much of it as a repeat needs.
struct Sent {
    /// The Event object's namespace and name.
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

struct Cache {
    by_key: HashMap<u64, Sent>,
    pruned: Timestamp,
}

/// Writes Events as the controller its caller names (the bridge's manager), this replica's identity as its
/// instance.
pub(crate) struct Recorder {
    client: kube::Client,
    controller: String,
    instance: String,
    cache: Mutex<Cache>,
}

impl Recorder {
    pub(crate) fn new(client: kube::Client, controller: &str, instance: &str) -> Self {
        Recorder {
            client,
            controller: controller.into(),
            instance: instance.into(),
            cache: Mutex::new(Cache {
                by_key: HashMap::new(),
                pruned: Timestamp::now(),
            }),
        }
    }

    /// What tells a repeat: client-go's key (type, action, reason, reporter, the object), the
    /// note left out as it leaves it out.
    fn key(&self, type_: Type, action: &str, reason: &str, regarding: &ObjectReference) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (type_, action, reason, &self.controller, &self.instance).hash(&mut h);
        let r = regarding;
        (
            &r.api_version,
            &r.kind,
            &r.namespace,
            &r.name,
            &r.uid,
            &r.field_path,
        )
            .hash(&mut h);
        h.finish()
    }

    /// Writes an Event about `regarding`: a new one, or the next of a series. A repeat whose
    /// first Event is gone (the API server keeps Events an hour) starts a new one.
    pub(crate) async fn publish(
        &self,
        type_: Type,
        reason: &str,
        note: &str,
        action: &str,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = self.key(type_, action, reason, regarding);
        let repeat = {
            let mut cache = self.cache.lock().expect("not poisoned");
            if now.duration_since(cache.pruned) >= PRUNE_EVERY {
                cache
                    .by_key
                    .retain(|_, s| now.duration_since(s.last) < SERIES_WINDOW);
                cache.pruned = now;
            }
            cache
                .by_key
                .get(&key)
                .filter(|s| now.duration_since(s.last) < SERIES_WINDOW)
                .map(|s| (s.namespace.clone(), s.name.clone(), s.count + 1))
        };
        if let Some((namespace, name, count)) = repeat {
            let patch = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            match events
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.remember(key, namespace, name, count, now);
                    return Ok(());
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = Event {
            action: Some(action.into()),
            reason: Some(reason.into()),
            note: Some(note.into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            metadata: ObjectMeta {
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(
                match type_ {
                    Type::Normal => "Normal",
                    Type::Warning => "Warning",
                }
                .into(),
            ),
            series: None::<EventSeries>,
            ..Event::default()
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        events.create(&PostParams::default(), &event).await?;
        self.remember(key, namespace, name, 1, now);
        Ok(())
    }

    fn remember(&self, key: u64, namespace: String, name: String, count: i32, last: Timestamp) {
        let mut cache = self.cache.lock().expect("not poisoned");
        cache.by_key.insert(
            key,
            Sent {
                namespace,
                name,
                count,
                last,
            },
        );
    }
}
