//! What one of Linkerd's multicluster Services is, from its labels and annotations: the one
//! reading of Linkerd's objects that `--source linkerd`, the linkerd-bridge's import half and its
//! export half share, so that no path takes an object another refuses (shapes: the module's
//! parent, from linkerd2 `version-2.20`).

use std::collections::BTreeMap;

use super::{
    ANNOTATION_FQ_NAME, ANNOTATION_LOCAL, ANNOTATION_REMOTE, LABEL_CLUSTER, LABEL_GATEWAY,
    LABEL_HEADLESS_PARENT, LABEL_MIRRORED,
};
use crate::model::Skip;
use crate::wire::{is_label, label};

/// One of Linkerd's Services, by what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// `<svc>-federated`: its members, by the Links they came through, and whether this
    /// cluster's own Service is one.
    Federated {
        service: String,
        remote: Vec<String>,
        local: bool,
    },
    /// `<svc>-<link>`, a mirror (headless or not: its spec says).
    Mirror { link: String, service: String },
    /// `<host>-<link>`, one host of the headless mirror `parent`.
    Host {
        link: String,
        service: String,
        parent: String,
        hostname: String,
    },
}

impl Shape {
    /// The exported service it stands for.
    pub fn service(&self) -> &str {
        match self {
            Shape::Federated { service, .. }
            | Shape::Mirror { service, .. }
            | Shape::Host { service, .. } => service,
        }
    }
}

/// Why a Service is not read as one of Linkerd's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// Not one of Linkerd's multicluster Services, or a gateway's mirror: passed over.
    Passed(&'static str),
    /// One of Linkerd's that cannot be used: the reason it is counted by, and why.
    Invalid(Skip, String),
}

/// What the Service in `namespace` with `labels` and `annotations` is.
pub fn classify(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Result<Shape, Unread> {
    if labels.get(LABEL_MIRRORED).map(String::as_str) != Some("true") {
        return Err(Unread::Passed("not one of Linkerd's"));
    }
    if labels.contains_key(LABEL_GATEWAY) {
        return Err(Unread::Passed("a mirrored gateway"));
    }
    let invalid = |skip, why: String| Err(Unread::Invalid(skip, why));
    let Some(link) = labels.get(LABEL_CLUSTER) else {
        return federated(annotations);
    };
    let Some(fq_name) = annotations.get(ANNOTATION_FQ_NAME) else {
        return invalid(
            Skip::BadAnnotation,
            format!("a mirror (label {LABEL_CLUSTER}) without the annotation {ANNOTATION_FQ_NAME}"),
        );
    };
    let parts: Vec<&str> = fq_name.trim_end_matches('.').split('.').collect();
    let parent = labels.get(LABEL_HEADLESS_PARENT);
    // `<svc>.<ns>.svc.<domain>`, with `<host>.` in front for a host.
    let at = usize::from(parent.is_some());
    if parts.len() < at + 4 || parts[at + 2] != "svc" {
        return invalid(
            Skip::BadAnnotation,
            format!(
                "annotation {ANNOTATION_FQ_NAME} {fq_name:?} is not {}<service>.<namespace>.svc.<domain>",
                if parent.is_some() { "<host>." } else { "" }
            ),
        );
    }
    if parts[at + 1] != namespace {
        return invalid(
            Skip::BadAnnotation,
            format!(
                "annotation {ANNOTATION_FQ_NAME} {fq_name:?} names a service in namespace {:?}, not a service in namespace {namespace}",
                parts[at + 1]
            ),
        );
    }
    let Some(service) = label(parts[at]) else {
        return invalid(
            Skip::BadName,
            format!(
                "service {:?} in annotation {ANNOTATION_FQ_NAME} is not a DNS label",
                parts[at].to_ascii_lowercase()
            ),
        );
    };
    let link = link.clone();
    let Some(parent) = parent else {
        return Ok(Shape::Mirror { link, service });
    };
    let Some(hostname) = label(parts[0]) else {
        return invalid(
            Skip::BadHostname,
            format!(
                "host {:?} in annotation {ANNOTATION_FQ_NAME} is not a DNS label",
                parts[0].to_ascii_lowercase()
            ),
        );
    };
    Ok(Shape::Host {
        link,
        service,
        parent: parent.clone(),
        hostname,
    })
}

/// A federated Service: its members name the service, all the same one.
fn federated(annotations: &BTreeMap<String, String>) -> Result<Shape, Unread> {
    let invalid = |skip, why: String| Err(Unread::Invalid(skip, why));
    let entries = |key| {
        annotations
            .get(key)
            .into_iter()
            .flat_map(|v: &String| v.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
    };
    let mut names: Vec<(&str, &str)> = Vec::new();
    let mut remote = Vec::new();
    for entry in entries(ANNOTATION_REMOTE) {
        match entry.split_once('@') {
            Some((svc, link)) if !svc.is_empty() && !link.is_empty() => {
                names.push((ANNOTATION_REMOTE, svc));
                remote.push(link.to_string());
            }
            _ => {
                return invalid(
                    Skip::BadAnnotation,
                    format!("annotation {ANNOTATION_REMOTE}: {entry:?} is not <service>@<link>"),
                );
            }
        }
    }
    let locals: Vec<&str> = entries(ANNOTATION_LOCAL).collect();
    names.extend(locals.iter().map(|e| (ANNOTATION_LOCAL, *e)));
    // Linkerd deletes a federated Service when its last member leaves
    // (`handleFederatedServiceLeave`); one that names none was not left by it.
    let Some(&(_, service)) = names.first() else {
        return invalid(
            Skip::NoMembers,
            format!(
                "a federated Service (label {LABEL_MIRRORED}, no {LABEL_CLUSTER}) whose \
                 annotations {ANNOTATION_REMOTE} and {ANNOTATION_LOCAL} name no member"
            ),
        );
    };
    if let Some((key, other)) = names.iter().find(|(_, n)| *n != service) {
        return invalid(
            Skip::BadAnnotation,
            format!("annotation {key} names service {other:?}, another member {service:?}"),
        );
    }
    if !is_label(service) {
        return invalid(
            Skip::BadName,
            format!("service {service:?} named by its annotations is not a lower-case DNS label"),
        );
    }
    Ok(Shape::Federated {
        service: service.to_string(),
        remote,
        local: !locals.is_empty(),
    })
}

/// The exported services one of Linkerd's Services can stand for, sorted, each once: the one
/// its `remote-svc-fq-name` names (a mirror's `<svc>.<ns>.svc.<domain>`, a host's
/// `<host>.<svc>.<ns>.svc.<domain>`; of neither form, both first labels), and a federated
/// Service's members, remote (`remote-discovery`'s `<svc>@<link>`) and local
/// (`local-discovery`). Read from the annotations alone, so that an object [`classify`] refuses
/// still names the services whose imports it may change (a federated Service may name several
/// while it is wrong); what it is, is [`classify`]'s.
pub fn services_named(namespace: &str, annotations: &BTreeMap<String, String>) -> Vec<String> {
    let get = |k: &str| annotations.get(k).map(String::as_str).unwrap_or_default();
    let mut names: Vec<&str> = Vec::new();
    let fq: Vec<&str> = get(ANNOTATION_FQ_NAME).split('.').collect();
    let at = |i: usize| fq.get(i).copied();
    if at(1) == Some(namespace) && at(2) == Some("svc") {
        names.extend(at(0));
    } else if at(2) == Some(namespace) && at(3) == Some("svc") {
        names.extend(at(1));
    } else {
        names.extend(fq.iter().take(2));
    }
    names.extend(
        get(ANNOTATION_REMOTE)
            .split(',')
            .filter_map(|m| m.trim().split_once('@'))
            .map(|(s, _)| s),
    );
    names.push(get(ANNOTATION_LOCAL).trim());
    let mut names: Vec<String> = names
        .into_iter()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const MIRRORED: (&str, &str) = (LABEL_MIRRORED, "true");

    #[test]
    fn each_shape_is_told_by_labels_and_annotations() {
        let fed = classify(
            "shop",
            &map(&[MIRRORED]),
            &map(&[
                (ANNOTATION_REMOTE, "web@east, web@west"),
                (ANNOTATION_LOCAL, "web"),
            ]),
        );
        assert_eq!(
            fed,
            Ok(Shape::Federated {
                service: "web".into(),
                remote: vec!["east".into(), "west".into()],
                local: true
            })
        );
        let mirror = classify(
            "shop",
            &map(&[MIRRORED, (LABEL_CLUSTER, "east")]),
            &map(&[(ANNOTATION_FQ_NAME, "Web.shop.svc.cluster.local")]),
        );
        assert_eq!(
            mirror,
            Ok(Shape::Mirror {
                link: "east".into(),
                service: "web".into()
            })
        );
        let host = classify(
            "data",
            &map(&[
                MIRRORED,
                (LABEL_CLUSTER, "east"),
                (LABEL_HEADLESS_PARENT, "db-east"),
            ]),
            &map(&[(ANNOTATION_FQ_NAME, "db-0.db.data.svc.cluster.local")]),
        );
        assert_eq!(host.unwrap().service(), "db");
        assert!(matches!(
            classify("shop", &map(&[]), &map(&[])),
            Err(Unread::Passed(_))
        ));
        assert!(matches!(
            classify(
                "shop",
                &map(&[MIRRORED, (LABEL_GATEWAY, "true")]),
                &map(&[])
            ),
            Err(Unread::Passed(_))
        ));
    }

    #[test]
    fn what_cannot_be_used_says_why_and_how_it_is_counted() {
        let skip = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| match classify(
            "shop",
            &map(labels),
            &map(annotations),
        ) {
            Err(Unread::Invalid(skip, why)) => (skip, why),
            other => panic!("{other:?}"),
        };
        let cases = [
            (vec![MIRRORED], vec![], Skip::NoMembers, "name no member"),
            (
                vec![MIRRORED],
                vec![(ANNOTATION_REMOTE, "web-west")],
                Skip::BadAnnotation,
                "is not <service>@<link>",
            ),
            (
                vec![MIRRORED],
                vec![(ANNOTATION_REMOTE, "web@east,api@west")],
                Skip::BadAnnotation,
                "names service \"api\"",
            ),
            (
                vec![MIRRORED, (LABEL_CLUSTER, "east")],
                vec![],
                Skip::BadAnnotation,
                "without the annotation",
            ),
            (
                vec![MIRRORED, (LABEL_CLUSTER, "east")],
                vec![(ANNOTATION_FQ_NAME, "web.data.svc.cluster.local")],
                Skip::BadAnnotation,
                "not a service in namespace shop",
            ),
            (
                vec![MIRRORED, (LABEL_CLUSTER, "east")],
                vec![(ANNOTATION_FQ_NAME, "web.shop")],
                Skip::BadAnnotation,
                "<service>.<namespace>.svc.<domain>",
            ),
            (
                vec![
                    MIRRORED,
                    (LABEL_CLUSTER, "east"),
                    (LABEL_HEADLESS_PARENT, "db-east"),
                ],
                vec![(ANNOTATION_FQ_NAME, "db_0.db.shop.svc.cluster.local")],
                Skip::BadHostname,
                "host \"db_0\"",
            ),
        ];
        for (labels, annotations, want, says) in cases {
            let (skip, why) = skip(&labels, &annotations);
            assert_eq!(skip, want, "{why}");
            assert!(why.contains(says), "{says} in {why}");
        }
    }

    #[test]
    fn the_services_a_linkerd_object_names() {
        let named = |pairs: &[(&str, &str)]| services_named("shop", &map(pairs));
        assert_eq!(
            named(&[(ANNOTATION_FQ_NAME, "api.shop.svc.cluster.local")]),
            ["api"]
        );
        // A host names its service, not itself.
        assert_eq!(
            named(&[(ANNOTATION_FQ_NAME, "db-0.db.shop.svc.cluster.local")]),
            ["db"]
        );
        // A service named as its namespace is still told from a host.
        assert_eq!(
            named(&[(ANNOTATION_FQ_NAME, "shop.shop.svc.cluster.local")]),
            ["shop"]
        );
        // A name of neither form marks both first labels.
        assert_eq!(named(&[(ANNOTATION_FQ_NAME, "a.b.c")]), ["a", "b"]);
        // A federated Service: its remote members and its local one.
        assert_eq!(
            named(&[
                (ANNOTATION_REMOTE, "api@west, web@east"),
                (ANNOTATION_LOCAL, "api")
            ]),
            ["api", "web"]
        );
        assert_eq!(named(&[(ANNOTATION_LOCAL, " cart ")]), ["cart"]);
        assert!(named(&[]).is_empty());
    }
}
