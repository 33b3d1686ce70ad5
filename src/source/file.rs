//! File source: a YAML or JSON file of Kubernetes objects (what `kubectl get -o yaml` prints, or
//! several documents), reloaded when it changes and on SIGHUP. A file that no longer parses keeps
//! the last good zone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use serde_yaml_ng::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::object::report_refused;
use super::policy::Policy;
use super::store::Store;
use super::{AnyKind, Classified, Selection, excluded, kinds};
use crate::metrics::Metrics;
use crate::model::{ServiceSet, Update};

/// Which file, and how often it is looked at.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    /// How often the file is checked for changes.
    pub poll: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path} is not valid YAML or JSON: {message}")]
    Parse { path: String, message: String },
}

/// What a load found.
#[derive(Debug)]
pub struct Loaded {
    pub services: ServiceSet,
    /// When the file was read.
    pub seen: Instant,
    /// How many objects of each kind it holds, as `Kind=N …`.
    pub objects: String,
    pub skipped: usize,
}

/// Splits a file's text into raw objects and hands them to `each` one document at a time (so a
/// large file never sits in memory as one tree): a stream of JSON values, or YAML documents;
/// `List`s and top-level arrays are expanded.
pub fn parse_text(text: &str, each: &mut dyn FnMut(Value)) -> Result<(), String> {
    let mut doc = |doc: Value| -> Result<(), String> {
        let mut out = Vec::new();
        match doc {
            Value::Sequence(items) => items.into_iter().for_each(|i| flatten(i, &mut out)),
            Value::Mapping(_) => flatten(doc, &mut out),
            Value::Null => {}
            other => {
                return Err(format!(
                    "a document is a {}, not a Kubernetes object",
                    kind_of(&other)
                ));
            }
        }
        out.into_iter().for_each(&mut *each);
        Ok(())
    };
    if text.trim_start().starts_with(['{', '[']) {
        for v in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
            let v = v.map_err(|e| e.to_string())?;
            doc(serde_yaml_ng::to_value(v).map_err(|e| e.to_string())?)?;
        }
    } else {
        for d in serde_yaml_ng::Deserializer::from_str(text) {
            doc(Value::deserialize(d).map_err(|e| e.to_string())?)?;
        }
    }
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        _ => "value",
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Classifies one object of a file (a YAML/JSON mapping) under `policy`: its kind and version
/// say which of `kinds` reads it, once. `List` objects are not handled here: see [`flatten`].
pub fn classify_with(
    v: Value,
    policy: &Policy,
    kinds: &[std::sync::Arc<dyn AnyKind>],
) -> Classified {
    let api = str_field(&v, "apiVersion").unwrap_or("");
    let kind = str_field(&v, "kind").unwrap_or("");
    let meta = v.get("metadata");
    let namespace = meta.and_then(|m| str_field(m, "namespace")).unwrap_or("");
    let name = meta.and_then(|m| str_field(m, "name")).unwrap_or("?");
    let object = format!("{namespace}/{name}");
    // Several kinds may read one kind of object (the MCS API's EndpointSlices and this
    // cluster's own): the first that does not pass it over reads it, and the first's reason
    // is said when all do.
    let readers: Vec<_> = kinds.iter().filter(|k| k.reads(api, kind)).collect();
    let Some((last, others)) = readers.split_last() else {
        return Classified::Ignored(format!("{kind} {api} {object}"));
    };
    if let Some(ignored) = excluded(readers[0].kind(), &object, namespace, policy) {
        return ignored;
    }
    let mut passed = None;
    for r in others {
        match r.read_file(v.clone(), &object, policy) {
            Classified::Ignored(why) => {
                passed.get_or_insert(why);
            }
            read => return read,
        }
    }
    match last.read_file(v, &object, policy) {
        Classified::Ignored(why) => Classified::Ignored(passed.unwrap_or(why)),
        read => read,
    }
}

/// [`classify_with`] the kinds `selection` reads.
pub fn classify(v: Value, policy: &Policy, selection: &Selection) -> Classified {
    classify_with(v, policy, &kinds(selection, None))
}

/// Expands `kind: List` (and `*List`) objects into their items, in order.
pub fn flatten(v: Value, out: &mut Vec<Value>) {
    let is_list = str_field(&v, "kind").is_some_and(|k| k.ends_with("List"));
    if is_list {
        if let Value::Mapping(mut m) = v {
            if let Some(Value::Sequence(items)) = m.remove("items") {
                for item in items {
                    flatten(item, out);
                }
            }
        }
    } else if !v.is_null() {
        out.push(v);
    }
}

/// Reads and converts the file; each unusable object (and refused address) is logged and
/// counted, then skipped.
pub fn load(
    path: &Path,
    policy: &Policy,
    selection: &Selection,
    metrics: &Metrics,
) -> Result<Loaded, LoadError> {
    let shown = path.display().to_string();
    let seen = Instant::now();
    let text = std::fs::read_to_string(path).map_err(|error| LoadError::Read {
        path: shown.clone(),
        error,
    })?;
    let kinds = kinds(selection, None);
    let mut store = Store::new(&kinds, selection.cluster_id.clone());
    let mut invalid = Vec::new();
    let mut refused = Vec::new();
    parse_text(
        &text,
        &mut |object| match classify_with(object, policy, &kinds) {
            Classified::Object(o) => {
                if !o.refused().is_empty() {
                    let (kind, object) = o.identity();
                    refused.push((kind, object, o.refused().to_vec()));
                }
                store.insert(o);
            }
            Classified::Ignored(what) => debug!(file = %shown, "ignored: {what}"),
            Classified::Invalid(e) => invalid.push(e),
        },
    )
    .map_err(|message| LoadError::Parse {
        path: shown.clone(),
        message,
    })?;
    // Reported only for a file that loads: a broken file changes nothing, counters included.
    for e in &invalid {
        warn!(file = %shown, reason = %e.reason, "skipped {e}");
        metrics.skipped(e.kind, e.reason);
    }
    for (kind, object, addresses) in &refused {
        report_refused(*kind, object, addresses, metrics);
    }
    store.settle_all(metrics);
    let skipped = invalid.len();
    metrics.source_synced();
    Ok(Loaded {
        seen,
        objects: kinds
            .iter()
            .map(|k| format!("{}={}", k.kind(), store.count(k.kind())))
            .collect::<Vec<_>>()
            .join(" "),
        services: store.into_snapshot(),
        skipped,
    })
}

/// What identifies a version of the file without reading it (symlinks followed, so a
/// ConfigMap's atomic `..data` swap counts as a change).
fn stamp(path: &Path) -> Option<(SystemTime, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

/// Loads the file once, so a bad file stops start-up with its reason.
pub fn initial(
    config: &Config,
    source: &super::Config,
    metrics: &Metrics,
) -> Result<Loaded, LoadError> {
    let loaded = load(&config.path, &source.policy, &source.selection, metrics);
    metrics.reload(loaded.is_ok());
    loaded
}

/// Watches the file and sends a full reset whenever it loads; stops at shutdown.
pub async fn run(
    config: Config,
    source: super::Config,
    first: Loaded,
    updates: mpsc::Sender<(Instant, Update)>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut last = stamp(&config.path);
    send(&config, first, &updates).await;
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGHUP; reloading on file changes only");
            None
        }
    };
    let mut tick = tokio::time::interval(config.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                let now = stamp(&config.path);
                if now == last { continue; }
                last = now;
                "file changed"
            }
            _ = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
        };
        match load(&config.path, &source.policy, &source.selection, &metrics) {
            Ok(loaded) => {
                metrics.reload(true);
                info!(file = %config.path.display(), why, "reloaded");
                send(&config, loaded, &updates).await;
            }
            Err(e) => {
                metrics.reload(false);
                warn!(why, "{e}; still serving the last good zone");
            }
        }
    }
}

async fn send(config: &Config, loaded: Loaded, updates: &mpsc::Sender<(Instant, Update)>) {
    info!(file = %config.path.display(), services = loaded.services.len(), objects = %loaded.objects, skipped = loaded.skipped, "loaded objects");
    // The builder outlives every source; a closed channel only happens at shutdown.
    let _ = updates
        .send((loaded.seen, Update::Reset(loaded.services)))
        .await;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Classifies one YAML object as the file source would, under the default policy.
    pub(crate) fn one(yaml: &str) -> Classified {
        classify(
            serde_yaml_ng::from_str::<Value>(yaml).unwrap(),
            &Policy::default(),
            &Selection::default(),
        )
    }

    /// Reads one YAML object as `kind` reads a file's, under the default policy: what [`one`]
    /// gives, before it is packed for the store.
    pub(crate) fn read<K: crate::source::object::Kind>(
        kind: &K,
        yaml: &str,
    ) -> crate::source::object::Read<K::Output> {
        let shape = serde_yaml_ng::from_str::<K::Shape>(yaml).unwrap();
        kind.convert(shape, &Policy::default())
    }

    fn all(text: &str) -> Result<Vec<Value>, String> {
        let mut v = Vec::new();
        parse_text(text, &mut |o| v.push(o)).map(|()| v)
    }

    #[test]
    fn yaml_documents_lists_and_json_streams() {
        let yaml = "---\napiVersion: v1\nkind: List\nitems:\n- {kind: A}\n- {kind: B}\n---\n---\nkind: C\n";
        assert_eq!(all(yaml).unwrap().len(), 3);
        let json = r#"{"kind":"List","items":[{"kind":"A"}]} {"kind":"B"}"#;
        assert_eq!(all(json).unwrap().len(), 2);
        assert_eq!(all("[{\"kind\":\"A\"},{\"kind\":\"B\"}]").unwrap().len(), 2);
    }

    #[test]
    fn broken_text_says_where() {
        let e = all("kind: A\n  bad: [\n").unwrap_err();
        assert!(e.contains("line"), "{e}");
        assert!(all("just a string").unwrap_err().contains("string"));
    }
}
