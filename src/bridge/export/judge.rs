//! The export half's judgement, with no API in it: from a ServiceExport, the Service it names
//! and the mirrors of that service that Linkerd's service mirror wrote here for other clusters,
//! the label the Service should carry and the ServiceExport's conditions (types and reasons of
//! sigs.k8s.io/mcs-api v0.5.2, `pkg/apis/v1beta1/serviceexport.go`).
//!
//! Linkerd's labels (linkerd2 `version-2.20`, the Link's default selectors):
//! `mirror.linkerd.io/federated=member` joins the federated Service `<svc>-federated` of each
//! linked cluster; `mirror.linkerd.io/exported=remote-discovery` gives each linked cluster a
//! mirror `<svc>-<link>` whose endpoints are discovered in this cluster;
//! `mirror.linkerd.io/exported=true` gives one that goes through the Link's gateway.

use std::collections::BTreeSet;

use serde_json::{Value, json};

pub use crate::bridge::model::{ClusterExport, Condition, Port, Status, owned_labels};
use crate::source::linkerd::carried::Carried;

/// The ServiceExport annotation that chooses how Linkerd exports the Service.
pub const MODE_ANNOTATION: &str = "linkerd-bridge.clusterset-dns.io/mode";

/// How Linkerd exports a Service: the label the bridge puts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `mirror.linkerd.io/federated=member`: one federated Service across the clusters.
    Federated,
    /// `mirror.linkerd.io/exported=remote-discovery`: a mirror per cluster, no gateway.
    RemoteDiscovery,
    /// `mirror.linkerd.io/exported=true`: a mirror per cluster, through the Link's gateway.
    Gateway,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Federated, Mode::RemoteDiscovery, Mode::Gateway];

    /// The word for it, in the annotation and the flag.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Federated => "federated",
            Mode::RemoteDiscovery => "remote-discovery",
            Mode::Gateway => "gateway",
        }
    }

    /// The label (key, value) Linkerd's service mirror selects the Service by.
    pub fn label(self) -> (&'static str, &'static str) {
        match self {
            Mode::Federated => ("mirror.linkerd.io/federated", "member"),
            Mode::RemoteDiscovery => ("mirror.linkerd.io/exported", "remote-discovery"),
            Mode::Gateway => ("mirror.linkerd.io/exported", "true"),
        }
    }

    fn from_word(word: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.word() == word)
    }
}

/// What the export half reads of the exported Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// `spec.type` (ClusterIP when unset).
    pub kind: String,
    /// `clusterIP: None`.
    pub headless: bool,
    /// As Linkerd's mirrors copy them: without `appProtocol`.
    pub ports: BTreeSet<Port>,
    /// What the export carries for other clusters (see [`Carried`]).
    pub carried: Carried,
}

/// The clusters whose exports the export half compares with: those it read through their
/// Links' credentials, and those it could not, with why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compared {
    pub read: Vec<String>,
    pub unread: Vec<(String, String)>,
}

/// What the label on the Service should become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// Put this mode's label on, taking off one the bridge put on for another mode.
    Set(Mode),
    /// Take off the label the bridge put on (a label set by anyone else stays).
    Remove,
    /// Leave the label as it is: the export's own annotation cannot be read.
    Keep,
}

pub const VALID: &str = "Valid";
pub const READY: &str = "Ready";
pub const CONFLICT: &str = "Conflict";

/// The label and the conditions for one ServiceExport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub label: Label,
    /// Valid and Ready always; Conflict once the export is valid.
    pub conditions: Vec<Condition>,
}

impl Verdict {
    /// The label could not be put on (`why`, from the API server): Ready turns False, Failed.
    pub fn failed(&mut self, why: &str) {
        for c in &mut self.conditions {
            if c.kind == READY {
                c.status = Status::False;
                c.reason = "Failed".into();
                c.message = why.into();
            }
        }
    }
    /// This cluster has no id: the export goes to other clusters, but this cluster's own
    /// ServiceImport cannot name it, and other clusters name it by their Link's name. Ready
    /// says so (reason `NoClusterId`), which gives a warning Event.
    pub fn no_cluster_id(&mut self) {
        for c in &mut self.conditions {
            if c.kind == READY && c.status == Status::True {
                c.reason = NO_CLUSTER_ID.into();
                c.message = format!(
                    "{}; but this cluster has no id, so its own ServiceImport leaves this export out: create the ClusterProperty cluster.clusterset.k8s.io (or give the bridge --cluster-id)",
                    c.message
                );
            }
        }
    }
}

/// Ready's reason for an export made by a cluster without an id.
pub const NO_CLUSTER_ID: &str = "NoClusterId";

/// The verdict on the export `ns/name` whose mode annotation is `annotation`, of `service`
/// (None: no Service of that name), with the `peers` visible here; `default` is the mode
/// without an annotation.
pub fn judge(
    ns: &str,
    name: &str,
    annotation: Option<&str>,
    default: Mode,
    service: Option<&Exported>,
    peers: &[ClusterExport],
    seen: &Compared,
) -> Verdict {
    let invalid = |label, reason: &str, message: String, ready: String| Verdict {
        label,
        conditions: vec![
            Condition::new(VALID, Status::False, reason, message),
            Condition::new(READY, Status::False, "Failed", ready),
        ],
    };
    let chosen = match annotation.map(str::trim) {
        None => None,
        Some(word) => match Mode::from_word(word) {
            Some(m) => Some(m),
            None => {
                return invalid(
                    Label::Keep,
                    "InvalidMode",
                    format!(
                        "annotation {MODE_ANNOTATION} is {word:?}: use federated, remote-discovery or gateway"
                    ),
                    "the Service's label is left as it was until the annotation is fixed".into(),
                );
            }
        },
    };
    let Some(svc) = service else {
        let missing =
            format!("Service {ns}/{name} does not exist: create it, or delete this ServiceExport");
        let ready = "exported once the Service exists".into();
        let mut v = invalid(Label::Remove, "NoService", missing, ready);
        v.conditions[1].reason = "Pending".into();
        return v;
    };
    if svc.kind == "ExternalName" {
        return invalid(
            Label::Remove,
            "InvalidServiceType",
            format!("Service {ns}/{name} is of type ExternalName, which cannot be exported"),
            "not exported: the export is not valid".into(),
        );
    }
    let mode = match (chosen, svc.headless) {
        (Some(Mode::Federated), true) => {
            return invalid(
                Label::Remove,
                "InvalidServiceType",
                format!(
                    "Service {ns}/{name} is headless, and Linkerd refuses headless federated members: set {MODE_ANNOTATION} to gateway (or remote-discovery)"
                ),
                "not exported: the export is not valid".into(),
            );
        }
        (Some(m), _) => m,
        (None, true) if default == Mode::Federated => Mode::RemoteDiscovery,
        (None, _) => default,
    };
    let (key, value) = mode.label();
    let ready = Condition::new(
        READY,
        Status::True,
        "Exported",
        if svc.headless && mode == Mode::RemoteDiscovery {
            // Linkerd mirrors no headless Service for remote discovery; the bridges import its
            // endpoints, which remote discovery reaches pod to pod.
            format!(
                "labelled {key}={value}: the linkerd-bridges of linked clusters import its endpoints (Linkerd's service mirror makes no mirror of a headless Service exported for remote discovery)"
            )
        } else {
            format!("labelled {key}={value}: the service mirrors of linked clusters import it")
        },
    );
    Verdict {
        label: Label::Set(mode),
        conditions: vec![
            Condition::new(
                VALID,
                Status::True,
                "Valid",
                format!("exported as {}", mode.word()),
            ),
            ready,
            conflict(svc, peers, seen),
        ],
    }
}

/// An Event on the ServiceExport: whether it warns, its reason and its note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

/// What to say in Events as the export's conditions go from `current` (its
/// `status.conditions`) to `wanted`, so that `kubectl describe serviceexport` and event
/// pipelines see what went wrong and when: a warning for each condition that turns bad or
/// says something new while bad (Valid False; Ready False while the export is valid, as an
/// invalid one says why already; Conflict True, reason `Conflict`, its reasons first in the
/// note), and a normal Event when Ready turns True. A condition as it was says nothing, so a
/// resync or a restart says nothing again.
pub fn events(wanted: &[Condition], current: &[Value]) -> Vec<Notice> {
    let was = |c: &Condition| current.iter().find(|o| o["type"] == c.kind);
    let valid = wanted
        .iter()
        .any(|c| c.kind == VALID && c.status == Status::True);
    let notice = |c: &Condition| {
        let old = was(c);
        let same = old.is_some_and(|o| {
            o["status"] == c.status.word() && o["reason"] == c.reason && o["message"] == c.message
        });
        let bad = match c.kind {
            VALID => c.status == Status::False,
            READY => (c.status == Status::False && valid) || c.reason == NO_CLUSTER_ID,
            _ => c.status == Status::True,
        };
        let warning = bad && !same;
        let ready = c.kind == READY
            && c.status == Status::True
            && old.is_none_or(|o| o["status"] != "True");
        let (reason, note) = match c.kind {
            CONFLICT => (CONFLICT.to_string(), format!("{}: {}", c.reason, c.message)),
            _ => (c.reason.clone(), c.message.clone()),
        };
        (warning || ready).then_some(Notice {
            warning,
            reason,
            note,
        })
    };
    wanted.iter().filter_map(notice).collect()
}

/// The Conflict condition: the Service against each peer's export (ports, headlessness and the
/// carried fields of [`crate::source::linkerd::carried::COMPARED`]), the same comparison every
/// cluster's bridge makes, so every export involved says so. `seen` says which clusters'
/// exports were read (none read and no peer: Unknown; read and none exports: no conflict).
fn conflict(svc: &Exported, peers: &[ClusterExport], seen: &Compared) -> Condition {
    // Every message ends with the clusters whose exports could not be read, after `sep`: what
    // is compared may be out of date.
    let unread = |sep: &str| {
        if seen.unread.is_empty() {
            return String::new();
        }
        let said: Vec<String> = seen
            .unread
            .iter()
            .map(|(c, why)| format!("cluster {c}'s exports cannot be read ({why})"))
            .collect();
        format!("{sep}{}", said.join("; "))
    };
    if peers.is_empty() {
        if seen.read.is_empty() {
            let message = format!(
                "no other cluster's export of this service is visible here: no Link's credentials could be read, so conflicts cannot be checked{}",
                unread(": ")
            );
            return Condition::new(CONFLICT, Status::Unknown, "NoPeers", message);
        }
        let message = format!(
            "no other cluster exports this service (read the exports of {}){}",
            seen.read.join(", "),
            unread("; ")
        );
        return Condition::new(CONFLICT, Status::False, "NoConflicts", message);
    }
    let (mut reasons, mut said) = (Vec::new(), Vec::new());
    let list = |ports: &BTreeSet<Port>| {
        ports
            .iter()
            .map(Port::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    for p in peers {
        let ports: BTreeSet<Port> = p.ports.iter().cloned().collect();
        if ports != svc.ports {
            said.push(format!(
                "cluster {} ({}) has ports [{}], this one [{}]",
                p.cluster,
                p.shown,
                list(&ports),
                list(&svc.ports)
            ));
            reasons.push("PortConflict");
        }
        if p.headless != svc.headless {
            let what = |h: bool| if h { "headless" } else { "not headless" };
            said.push(format!(
                "cluster {} ({}) is {}, this one {}",
                p.cluster,
                p.shown,
                what(p.headless),
                what(svc.headless)
            ));
            reasons.push("TypeConflict");
        }
        for d in p
            .carried
            .as_ref()
            .map(|theirs| svc.carried.differences(theirs))
            .unwrap_or_default()
        {
            said.push(format!(
                "cluster {} ({}) has {} {}, this one {}",
                p.cluster, p.shown, d.field, d.theirs, d.mine
            ));
            reasons.push(d.reason);
        }
    }
    let clusters: BTreeSet<&str> = peers.iter().map(|p| p.cluster.as_str()).collect();
    let clusters = clusters.into_iter().collect::<Vec<_>>().join(", ");
    if reasons.is_empty() {
        let (what, why) = match peers.iter().any(|p| p.carried.is_none()) {
            true => (
                "ports and type",
                " (a Service labelled for Linkerd by hand carries no other fields to compare)",
            ),
            false => ("ports, type and other fields", ""),
        };
        let message = format!("the same {what} as in {clusters}{why}{}", unread("; "));
        return Condition::new(CONFLICT, Status::False, "NoConflicts", message);
    }
    reasons.sort_unstable();
    reasons.dedup();
    let message = format!(
        "{}; every cluster's import follows the oldest export{}",
        said.join("; "),
        unread("; ")
    );
    Condition::new(CONFLICT, Status::True, &reasons.join(","), message)
}

/// The conditions to write: each of `wanted`, with the `lastTransitionTime` of the current
/// condition of its type when its status did not change (else `now`), and whether any differs
/// from `current` (a condition the bridge no longer sets counts too).
pub fn conditions(
    wanted: &[Condition],
    current: &[Value],
    generation: Option<i64>,
    now: &str,
) -> (Vec<Value>, bool) {
    let find = |kind: &str| current.iter().find(|c| c["type"] == kind);
    let mut changed = current.len() != wanted.len();
    let out = wanted
        .iter()
        .map(|w| {
            let old = find(w.kind);
            let same_status = old.is_some_and(|o| o["status"] == w.status.word());
            let time = match old {
                Some(o) if same_status => o["lastTransitionTime"].clone(),
                _ => Value::from(now),
            };
            let c = json!({
                "type": w.kind,
                "status": w.status.word(),
                "reason": w.reason,
                "message": w.message,
                "lastTransitionTime": time,
                "observedGeneration": generation,
            });
            if old != Some(&c) {
                changed = true;
            }
            c
        })
        .collect();
    (out, changed)
}
