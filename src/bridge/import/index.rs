//! What the import half keeps by service: which of Linkerd's Services and which
//! EndpointSlices name each one (so that a service is judged from its own objects), and what
//! is said about each one now.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::{Host, Problem};
use crate::bridge::Key;
pub(super) use crate::bridge::runtime::index::Index;
use crate::source::linkerd::shape::services_named;
use crate::source::mcs::LABEL_SERVICE_NAME;

#[derive(Default)]
pub(super) struct Indexes {
    pub(super) services: Index,
    pub(super) slices: Index,
    /// This cluster's slices of its headless exports, by service.
    pub(super) hosts: Index,
}

/// What the import half says, by service: the problems in the log and an Event, the objects
/// someone else holds. A message is said when the first service comes to hold it, and again
/// only after no service held it for a while (it went, and came back); it is forgotten when no
/// service holds it, so what is kept is bounded by what is wrong now.
#[derive(Default)]
pub(super) struct Told {
    pub(super) by_key: HashMap<Key, Said>,
    /// How many services hold each message.
    held: HashMap<String, usize>,
}

/// What one service's last reconcile found to say, and count.
#[derive(Default, Clone, PartialEq, Eq)]
pub(super) struct Said {
    pub(super) messages: BTreeSet<String>,
    /// The objects that could not be used, by namespace and name.
    pub(super) unusable: BTreeSet<(String, String)>,
    /// Its ServiceImport and how many of its slices someone else holds.
    pub(super) foreign: (usize, usize),
}

impl Told {
    /// Records what `key` holds now; the messages no service held before, to be said.
    pub(super) fn hold(&mut self, key: &Key, now: Said) -> Vec<String> {
        let before = self.by_key.remove(key).unwrap_or_default();
        for m in before.messages.difference(&now.messages) {
            if let Some(n) = self.held.get_mut(m) {
                *n -= 1;
                if *n == 0 {
                    self.held.remove(m);
                }
            }
        }
        let mut new = Vec::new();
        for m in now.messages.difference(&before.messages) {
            let n = self.held.entry(m.clone()).or_default();
            if *n == 0 {
                new.push(m.clone());
            }
            *n += 1;
        }
        if now != Said::default() {
            self.by_key.insert(key.clone(), now);
        }
        new
    }
}

/// The services a change of one of Linkerd's Services can change the import of: those it names
/// ([`services_named`]); one that names none is judged under its own name, so what is wrong
/// with it is said.
pub(super) fn keys_of_service(svc: &Service) -> Vec<Key> {
    let (Some(ns), Some(object)) = (&svc.metadata.namespace, &svc.metadata.name) else {
        return Vec::new();
    };
    let annotations = svc.metadata.annotations.clone().unwrap_or_default();
    let mut keys: Vec<Key> = services_named(ns, &annotations)
        .into_iter()
        .map(|n| (ns.clone(), n))
        .collect();
    if keys.is_empty() {
        keys.push((ns.clone(), object.clone()));
    }
    keys
}

pub(super) fn key_of_slice(s: &EndpointSlice) -> Option<Key> {
    service_of(s, LABEL_SERVICE_NAME)
}

/// The service a slice of this cluster's own is of (the endpointslice controller's label).
pub(super) fn key_of_local_slice(s: &EndpointSlice) -> Option<Key> {
    service_of(s, "kubernetes.io/service-name")
}

/// The slice's namespace and the service its label `label` names.
fn service_of(s: &EndpointSlice, label: &str) -> Option<Key> {
    let svc = s.metadata.labels.as_ref()?.get(label)?;
    Some((s.metadata.namespace.clone()?, svc.clone()))
}

/// A slice's hosts: each endpoint that is ready (unset counts as ready, as the API says), with
/// its hostname if it has one, once per address.
pub(super) fn hosts_of(s: &EndpointSlice) -> Vec<Host> {
    s.endpoints
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .flat_map(|e| {
            e.addresses
                .iter()
                .filter_map(|a| a.parse::<IpAddr>().ok())
                .map(|ip| (e.hostname.clone(), ip))
        })
        .collect()
}

/// A problem as [`Told`] holds it: `Service <reason> <namespace> <object>`, a line break, and
/// the message.
pub(super) fn problem_text(p: &Problem) -> String {
    format!(
        "Service {} {} {}\n{}",
        p.reason, p.namespace, p.object, p.message
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::linkerd::ANNOTATION_FQ_NAME;

    fn key(ns: &str, name: &str) -> Key {
        (ns.into(), name.into())
    }

    fn svc(ns: &str, name: &str, annotations: &[(&str, &str)]) -> Service {
        let mut s = Service::default();
        s.metadata.namespace = Some(ns.into());
        s.metadata.name = Some(name.into());
        s.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        s
    }

    #[test]
    fn a_linkerd_service_is_judged_under_the_services_it_names_or_its_own_name() {
        let host = svc(
            "shop",
            "db-0-west",
            &[(ANNOTATION_FQ_NAME, "db-0.db.shop.svc.cluster.local")],
        );
        assert_eq!(keys_of_service(&host), [key("shop", "db")]);
        // One that names none is judged under its own name, so its problem is said.
        let bare = svc("shop", "odd-federated", &[]);
        assert_eq!(keys_of_service(&bare), [key("shop", "odd-federated")]);
    }

    fn said(messages: &[&str], unusable: &[(&str, &str)]) -> Said {
        Said {
            messages: messages.iter().map(|m| m.to_string()).collect(),
            unusable: unusable
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            foreign: (0, 0),
        }
    }

    #[test]
    fn a_message_is_said_once_while_any_service_holds_it_and_forgotten_after() {
        let mut t = Told::default();
        let (a, b) = (key("shop", "a"), key("shop", "b"));
        assert_eq!(t.hold(&a, said(&["m1"], &[("shop", "x")])), ["m1"]);
        assert_eq!(
            t.hold(&a, said(&["m1"], &[("shop", "x")])),
            Vec::<String>::new()
        );
        // Another service finding the same problem does not say it again.
        assert_eq!(t.hold(&b, said(&["m1", "m2"], &[])), ["m2"]);
        assert_eq!(t.hold(&a, Said::default()), Vec::<String>::new());
        assert!(
            !t.by_key.contains_key(&a),
            "nothing kept for a service with nothing to say"
        );
        assert_eq!(t.held.get("m1"), Some(&1));
        assert_eq!(t.hold(&b, Said::default()), Vec::<String>::new());
        assert!(
            t.held.is_empty() && t.by_key.is_empty(),
            "bounded by what is wrong now"
        );
        // Gone and back: said again.
        assert_eq!(t.hold(&a, said(&["m1"], &[])), ["m1"]);
    }
}
