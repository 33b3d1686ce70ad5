use serde_json::Value;

use super::*;
use crate::source::linkerd::carried::Carried;

/// The judge of `shop/web` with no linked cluster read: peers only as given.
fn web(
    annotation: Option<&str>,
    default: Mode,
    svc: Option<&Exported>,
    peers: &[ClusterExport],
) -> Verdict {
    let seen = Compared::default();
    judge("shop", "web", annotation, default, svc, peers, &seen)
}

fn port(name: &str, port: i32) -> Port {
    Port {
        name: name.into(),
        protocol: "TCP".into(),
        port,
        app_protocol: None,
    }
}

fn svc(headless: bool, ports: &[Port]) -> Exported {
    Exported {
        kind: "ClusterIP".into(),
        headless,
        ports: ports.iter().cloned().collect(),
        carried: Carried::default(),
    }
}

fn peer(cluster: &str, headless: bool, ports: &[Port]) -> ClusterExport {
    ClusterExport {
        cluster: cluster.into(),
        link: Some(cluster.into()),
        object: Some(format!("web-{cluster}")),
        shown: format!("web-{cluster}"),
        headless,
        ports: ports.to_vec(),
        carried: None,
        ..ClusterExport::default()
    }
}

fn summary(v: &Verdict) -> Vec<(&'static str, Status, &str)> {
    v.conditions
        .iter()
        .map(|c| (c.kind, c.status, c.reason.as_str()))
        .collect()
}

#[test]
fn the_mode_comes_from_the_annotation_else_the_default_and_headless_is_never_federated() {
    let http = [port("http", 80)];
    let cases = [
        (None, false, Label::Set(Mode::Federated)),
        (None, true, Label::Set(Mode::RemoteDiscovery)),
        (Some("gateway"), true, Label::Set(Mode::Gateway)),
        (
            Some(" remote-discovery "),
            false,
            Label::Set(Mode::RemoteDiscovery),
        ),
        (Some("federated"), true, Label::Remove),
        (Some("Federated"), false, Label::Keep),
        (Some(""), false, Label::Keep),
    ];
    for (annotation, headless, label) in cases {
        let v = web(
            annotation,
            Mode::Federated,
            Some(&svc(headless, &http)),
            &[],
        );
        assert_eq!(v.label, label, "{annotation:?} headless={headless}");
    }
    let v = web(Some("fed"), Mode::Federated, Some(&svc(false, &http)), &[]);
    assert_eq!(summary(&v)[0], (VALID, Status::False, "InvalidMode"));
    assert!(v.conditions[0].message.contains("\"fed\""), "{v:?}");
    let v = web(
        Some("federated"),
        Mode::Federated,
        Some(&svc(true, &http)),
        &[],
    );
    assert_eq!(summary(&v)[0], (VALID, Status::False, "InvalidServiceType"));
    assert!(v.conditions[0].message.contains("gateway"), "{v:?}");
}

#[test]
fn a_missing_or_external_name_service_is_not_valid_and_loses_the_label() {
    let v = web(None, Mode::Federated, None, &[]);
    assert_eq!(v.label, Label::Remove);
    assert_eq!(
        summary(&v),
        [
            (VALID, Status::False, "NoService"),
            (READY, Status::False, "Pending")
        ]
    );
    assert!(v.conditions[0].message.contains("shop/web"));
    let mut ext = svc(false, &[]);
    ext.kind = "ExternalName".into();
    let v = web(None, Mode::Federated, Some(&ext), &[]);
    assert_eq!(v.label, Label::Remove);
    assert_eq!(summary(&v)[0], (VALID, Status::False, "InvalidServiceType"));
}

#[test]
fn a_valid_export_is_ready_headless_for_remote_discovery_too() {
    let http = [port("http", 80)];
    let v = web(None, Mode::Federated, Some(&svc(false, &http)), &[]);
    assert_eq!(
        summary(&v),
        [
            (VALID, Status::True, "Valid"),
            (READY, Status::True, "Exported"),
            (CONFLICT, Status::Unknown, "NoPeers")
        ]
    );
    assert!(
        v.conditions[1]
            .message
            .contains("mirror.linkerd.io/federated=member")
    );
    assert!(
        v.conditions[2].message.contains("no Link's credentials"),
        "{v:?}"
    );
    // A headless Service for remote discovery: Linkerd mirrors none, the bridges import its
    // endpoints.
    let v = web(None, Mode::Federated, Some(&svc(true, &http)), &[]);
    assert_eq!(summary(&v)[1], (READY, Status::True, "Exported"));
    assert!(v.conditions[1].message.contains("import its endpoints"));
    let mut v = web(None, Mode::Gateway, Some(&svc(false, &http)), &[]);
    v.failed("the label is set to \"false\" by kubectl");
    assert_eq!(summary(&v)[1], (READY, Status::False, "Failed"));
    assert_eq!(
        v.conditions[1].message,
        "the label is set to \"false\" by kubectl"
    );
}

#[test]
fn conflicts_name_each_cluster_and_what_differs() {
    let (http, https) = (port("http", 80), port("https", 443));
    let mine = svc(false, std::slice::from_ref(&http));
    let judge_with = |peers: &[ClusterExport]| {
        web(None, Mode::Federated, Some(&mine), peers).conditions[2].clone()
    };
    let c = judge_with(&[peer("west", false, std::slice::from_ref(&http))]);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::False, "NoConflicts")
    );
    assert!(c.message.contains("west"));
    let c = judge_with(&[
        peer("west", false, std::slice::from_ref(&http)),
        peer("north", false, &[http.clone(), https.clone()]),
    ]);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::True, "PortConflict")
    );
    assert!(c.message.contains("cluster north") && c.message.contains("https:443/TCP"));
    assert!(!c.message.contains("cluster west"), "{}", c.message);
    let c = judge_with(&[peer("south", true, &[https])]);
    assert_eq!(c.reason, "PortConflict,TypeConflict");
    assert!(
        c.message.contains("is headless, this one not headless"),
        "{}",
        c.message
    );
}

#[test]
fn events_say_what_turned_bad_and_when_it_is_exported_once() {
    let http = [port("http", 80)];
    let as_written = |v: &Verdict| -> Vec<Value> {
        v.conditions
            .iter()
            .map(|c| {
                serde_json::json!({"type": c.kind, "status": c.status.word(), "reason": c.reason, "message": c.message})
            })
            .collect()
    };
    let said = |v: &Verdict, before: &[Value]| -> Vec<(bool, String)> {
        events(&v.conditions, before)
            .into_iter()
            .map(|s| (s.warning, s.reason))
            .collect()
    };
    // No Service yet: one warning (not a second for Ready Pending).
    let missing = web(None, Mode::Federated, None, &[]);
    assert_eq!(said(&missing, &[]), [(true, "NoService".to_string())]);
    // Notice once: the same conditions again say nothing.
    assert!(said(&missing, &as_written(&missing)).is_empty());
    // The Service comes: Exported, as a normal Event.
    let ok = web(None, Mode::Federated, Some(&svc(false, &http)), &[]);
    assert_eq!(
        said(&ok, &as_written(&missing)),
        [(false, "Exported".to_string())]
    );
    assert!(said(&ok, &as_written(&ok)).is_empty());
    // A peer with other ports: a warning named Conflict, its reasons in the note.
    let conflicting = web(
        None,
        Mode::Federated,
        Some(&svc(false, &http)),
        &[peer("west", false, &[port("http", 8080)])],
    );
    let e = events(&conflicting.conditions, &as_written(&ok));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].warning && e[0].reason == "Conflict", "{e:?}");
    assert!(e[0].note.starts_with("PortConflict: cluster west"), "{e:?}");
    // Valid but not ready (the label could not be written): a warning.
    let mut failed = web(None, Mode::Federated, Some(&svc(false, &http)), &[]);
    failed.failed("the label is set to \"false\" by kubectl");
    assert_eq!(
        said(&failed, &as_written(&ok)),
        [(true, "Failed".to_string())]
    );
}

#[test]
fn the_fields_a_peer_carried_are_compared_too() {
    let http = [port("http", 80)];
    let fields = |json: serde_json::Value| Carried::parse(&json.to_string()).unwrap();
    let mut mine = svc(false, &http);
    mine.carried = fields(serde_json::json!({
        "exportCreated": "2026-12-04T10:00:00Z",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
        "exportedLabels": {"team": "shop"},
        "ports": [],
    }));
    let with = |carried: Option<serde_json::Value>| {
        let mut p = peer("west", false, &http);
        p.carried = carried.map(fields);
        web(None, Mode::Federated, Some(&mine), &[p]).conditions[2].clone()
    };
    // The same fields (the creation time and ports are not among them): no conflict.
    let c = with(Some(serde_json::json!({
        "exportCreated": "2026-12-01T10:00:00Z",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
        "exportedLabels": {"team": "shop"},
    })));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::False, "NoConflicts")
    );
    assert!(c.message.contains("other fields"), "{}", c.message);
    // A peer labelled by hand carries nothing to compare, and the message says so.
    let c = with(None);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::False, "NoConflicts")
    );
    assert!(c.message.contains("by hand"), "{}", c.message);
    let c = with(Some(serde_json::json!({
        "sessionAffinity": "ClientIP",
        "internalTrafficPolicy": "Cluster",
        "trafficDistribution": "PreferClose",
        "exportedLabels": {"team": "cart"},
        "exportedAnnotations": {"owner": "x"},
    })));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (
            Status::True,
            "AnnotationsConflict,LabelsConflict,SessionAffinityConflict,TrafficDistributionConflict"
        )
    );
    for said in [
        "cluster west (web-west) has sessionAffinity \"ClientIP\", this one \"None\"",
        "has trafficDistribution \"PreferClose\", this one unset",
        "has exportedLabels {\"team\":\"cart\"}, this one {\"team\":\"shop\"}",
        "has exportedAnnotations {\"owner\":\"x\"}, this one unset",
    ] {
        assert!(c.message.contains(said), "{said} in {}", c.message);
    }
}

#[test]
fn what_was_read_decides_between_unknown_and_no_conflict() {
    let http = [port("http", 80)];
    let mine = svc(false, &http);
    let with = |seen: Compared| {
        super::judge(
            "shop",
            "web",
            None,
            Mode::Federated,
            Some(&mine),
            &[],
            &seen,
        )
        .conditions[2]
            .clone()
    };
    // Nothing read: nothing can be said.
    let c = with(Compared::default());
    assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, "NoPeers"));
    let c = with(Compared {
        read: vec![],
        unread: vec![("west".into(), "Secret x cannot be read: 403".into())],
    });
    assert_eq!((c.status, c.reason.as_str()), (Status::Unknown, "NoPeers"));
    assert!(
        c.message
            .contains("cluster west's exports cannot be read (Secret x"),
        "{}",
        c.message
    );
    // Read, and nobody else exports it: no conflict, and which clusters were read.
    let c = with(Compared {
        read: vec!["east".into(), "west".into()],
        unread: vec![("north".into(), "no key kubeconfig".into())],
    });
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::False, "NoConflicts")
    );
    assert!(
        c.message.contains("read the exports of east, west"),
        "{}",
        c.message
    );
    assert!(
        c.message.contains("cluster north's exports cannot be read"),
        "{}",
        c.message
    );
    // A conflict with a peer read, another cluster not: both said.
    let c = super::judge(
        "shop",
        "web",
        None,
        Mode::Federated,
        Some(&mine),
        &[peer("west", false, &[port("http", 8080)])],
        &Compared {
            read: vec!["west".into()],
            unread: vec![("north".into(), "watching its exported Services: 401".into())],
        },
    )
    .conditions[2]
        .clone();
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::True, "PortConflict")
    );
    for said in [
        "cluster west (",
        "cluster north's exports cannot be read (watching its exported Services: 401)",
    ] {
        assert!(c.message.contains(said), "{said} in {}", c.message);
    }
}

#[test]
fn an_export_without_a_cluster_id_warns() {
    let mut v = web(
        None,
        Mode::Federated,
        Some(&svc(false, &[port("http", 80)])),
        &[],
    );
    v.no_cluster_id();
    assert_eq!(summary(&v)[1], (READY, Status::True, NO_CLUSTER_ID));
    assert!(v.conditions[1].message.contains("ClusterProperty"), "{v:?}");
    let e = events(&v.conditions, &[]);
    assert!(
        e.iter().any(|e| e.warning && e.reason == NO_CLUSTER_ID),
        "{e:?}"
    );
}

fn condition(kind: &'static str, status: Status, reason: &str) -> Condition {
    Condition {
        kind,
        status,
        reason: reason.into(),
        message: format!("{kind} is {}", status.word()),
    }
}

/// A condition whose status stays keeps its lastTransitionTime; one whose status changes, or
/// that is new, takes now; and a condition the bridge no longer sets counts as a change.
#[test]
fn conditions_keep_their_transition_time_while_their_status_stays() {
    let wanted = [
        condition(VALID, Status::True, "Valid"),
        condition(READY, Status::True, "Ready"),
    ];
    let first = conditions(&wanted, &[], Some(3), "2026-12-05T00:00:00Z").0;
    assert_eq!(first[0]["lastTransitionTime"], "2026-12-05T00:00:00Z");
    assert_eq!(first[1]["observedGeneration"], 3);
    let (again, changed) = conditions(&wanted, &first, Some(3), "2026-12-05T01:00:00Z");
    assert!(!changed, "the same verdict writes nothing");
    assert_eq!(again, first);
    let flipped = [
        condition(VALID, Status::True, "Valid"),
        condition(READY, Status::False, "NotReady"),
    ];
    let (next, changed) = conditions(&flipped, &first, Some(3), "2026-12-05T02:00:00Z");
    assert!(changed);
    assert_eq!(next[0]["lastTransitionTime"], "2026-12-05T00:00:00Z");
    assert_eq!(next[1]["lastTransitionTime"], "2026-12-05T02:00:00Z");
    let (_, changed) = conditions(&wanted[..1], &first, Some(3), "2026-12-05T02:00:00Z");
    assert!(changed, "a condition dropped is a change");
    let (_, changed) = conditions(&wanted, &first, Some(4), "2026-12-05T02:00:00Z");
    assert!(changed, "a new generation is written");
}

/// The labels the bridge holds are those its field manager applied on the object itself (not
/// on a subresource), whoever else set other labels.
#[test]
fn owned_labels_are_those_the_bridges_field_manager_applied() {
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "api", "managedFields": [
            {"manager": crate::bridge::model::FIELD_MANAGER, "operation": "Apply",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:mirror.linkerd.io/federated": {}},
                                         "f:annotations": {"f:x": {}}}}},
            {"manager": crate::bridge::model::FIELD_MANAGER, "operation": "Apply",
             "subresource": "status",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:not-this": {}}}}},
            {"manager": "kubectl", "operation": "Update",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}
        ]}
    }))
    .unwrap();
    let owned: Vec<String> = owned_labels(&svc).into_iter().collect();
    assert_eq!(owned, ["mirror.linkerd.io/federated"]);
    assert!(owned_labels(&Default::default()).is_empty());
}

/// What the stores keep of an object is what is read of it: the bridge's own record of the
/// labels and annotations it holds (and the labels it holds stay its), nothing of other
/// managers' records, of its own record's other fields, or kubectl's last applied copy.
#[test]
fn the_stores_keep_of_an_object_what_is_read_of_it() {
    let own = crate::bridge::model::FIELD_MANAGER;
    let mut svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "api", "labels": {"app": "api"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"a\":1}", "team": "shop"},
            "managedFields": [
            {"manager": own, "operation": "Apply",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:mirror.linkerd.io/federated": {}},
                                         "f:annotations": {"f:x": {}}, "f:finalizers": {}},
                          "f:spec": {"f:ports": {"k:{\"port\":80}": {}}}}},
            {"manager": own, "operation": "Apply", "subresource": "status",
             "fieldsV1": {"f:status": {}}},
            {"manager": "kubectl", "operation": "Update",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}
        ]}
    }))
    .unwrap();
    crate::bridge::runtime::slim(&mut svc);
    let kept = serde_json::to_value(&svc.metadata).unwrap();
    assert_eq!(
        kept["managedFields"],
        serde_json::json!([{"manager": own, "operation": "Apply",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:mirror.linkerd.io/federated": {}},
                                        "f:annotations": {"f:x": {}}}}}])
    );
    assert_eq!(kept["annotations"], serde_json::json!({"team": "shop"}));
    assert_eq!(kept["labels"], serde_json::json!({"app": "api"}));
    assert_eq!(
        owned_labels(&svc).into_iter().collect::<Vec<_>>(),
        ["mirror.linkerd.io/federated"]
    );
    // Nobody else's record: none at all.
    let mut other: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "db", "managedFields": [{"manager": "kubectl", "operation": "Update"}]}
    }))
    .unwrap();
    crate::bridge::runtime::slim(&mut other);
    assert!(other.metadata.managed_fields.is_none());
}

/// A change of one of Linkerd's Services marks its own name and the exports it stands for: a
/// host mirror its service (not the host), a federated Service its remote and local members.
#[test]
fn a_linkerd_service_marks_the_exports_it_stands_for() {
    use crate::source::linkerd::{
        ANNOTATION_FQ_NAME, ANNOTATION_LOCAL, ANNOTATION_REMOTE, LABEL_CLUSTER, LABEL_MIRRORED,
    };
    let service = |name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]| {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let mut s = k8s_openapi::api::core::v1::Service::default();
        s.metadata.namespace = Some("shop".into());
        s.metadata.name = Some(name.into());
        s.metadata.labels = map(labels);
        s.metadata.annotations = map(annotations);
        s
    };
    let keys = |s| {
        super::read::keys_of_service(&s)
            .into_iter()
            .map(|(_, name)| name)
            .collect::<Vec<_>>()
    };
    let host = service(
        "db-0-west",
        &[(LABEL_MIRRORED, "true"), (LABEL_CLUSTER, "west")],
        &[(ANNOTATION_FQ_NAME, "db-0.db.shop.svc.cluster.local")],
    );
    assert_eq!(keys(host), ["db", "db-0-west"]);
    let federated = service(
        "api-federated",
        &[(LABEL_MIRRORED, "true")],
        &[
            (ANNOTATION_REMOTE, "api@west, web@east"),
            (ANNOTATION_LOCAL, "cart"),
        ],
    );
    assert_eq!(keys(federated), ["api", "api-federated", "cart", "web"]);
    // A Service that is not Linkerd's marks only itself, whatever its annotations say.
    let plain = service(
        "web",
        &[],
        &[(ANNOTATION_FQ_NAME, "api.shop.svc.cluster.local")],
    );
    assert_eq!(keys(plain), ["web"]);
}
