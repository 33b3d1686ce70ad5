use super::*;

#[test]
fn the_oldest_export_decides_type_and_port_clashes() {
    // A mirror as Linkerd writes it for a cluster whose export the export half made at
    // `created` (None: labelled by hand), with one port and headless or not.
    let exported = |link: &str, created: Option<&str>, port: u16, headless: bool| {
        let carried = created.map_or(String::new(), |c| {
            format!(", linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{c}\"}}'")
        });
        let ip = if headless {
            "None".to_string()
        } else {
            format!("198.18.3.{port}")
        };
        svc(&format!(
            "metadata: {{name: web-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local{carried}}}}}\n\
             spec: {{clusterIP: '{ip}', ports: [{{name: http, port: {port}, protocol: TCP}}]}}"
        ))
    };
    let all = links(&["a", "b", "c"]);
    // `c` exported first: its port 82 is the import's, whatever the names' order; the
    // others stay, each slice with its own cluster's port, and each is said to conflict.
    let j = judge(
        &[
            exported("a", Some("2026-12-04T10:00:00Z"), 80, false),
            exported("b", None, 81, false),
            exported("c", Some("2026-12-01T10:00:00Z"), 82, false),
        ],
        &all,
        &Naming::default(),
    );
    let i = &j.imports[&key("web")];
    assert_eq!(i.ports.iter().map(|p| p.port).collect::<Vec<_>>(), [82]);
    assert_eq!(
        i.clusters,
        BTreeSet::from(["a".into(), "b".into(), "c".into()])
    );
    let slice_ports: Vec<(String, i32)> = i
        .slices
        .iter()
        .map(|s| (s.cluster.clone(), s.ports[0].port))
        .collect();
    assert_eq!(
        slice_ports,
        [("a".into(), 80), ("b".into(), 81), ("c".into(), 82)]
    );
    let conflicts: Vec<&str> = j
        .problems
        .iter()
        .filter(|p| p.reason == Reason::ExportConflict)
        .map(|p| p.object.as_str())
        .collect();
    assert_eq!(conflicts, ["web-c", "web-a", "web-b"], "{:?}", j.problems);
    assert!(
        j.problems[1].message.contains(
            "port name \"http\" is http:80/TCP here but http:82/TCP in the older export web-c"
        ),
        "{:?}",
        j.problems
    );

    // Other port names add up: the import has the union, and every export that differs
    // from it is said to conflict, the oldest too (KEP-1645: the union of the
    // constituent services' ports, and a conflict on each export).
    let with_ports = |link: &str, created: &str, ports: &str| {
        svc(&format!(
            "metadata: {{name: web-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{created}\"}}'}}}}\n\
             spec: {{clusterIP: 198.18.3.9, ports: [{ports}]}}"
        ))
    };
    let j = judge(
        &[
            with_ports(
                "a",
                "2026-12-01T10:00:00Z",
                "{name: tcp, port: 42, protocol: TCP}, {name: udp, port: 42, protocol: UDP}",
            ),
            with_ports(
                "b",
                "2026-12-02T10:00:00Z",
                "{name: tcp, port: 42, protocol: TCP}, {name: stcp, port: 142, protocol: SCTP}",
            ),
            with_ports(
                "c",
                "2026-12-03T10:00:00Z",
                "{name: udp, port: 43, protocol: UDP}",
            ),
        ],
        &all,
        &Naming::default(),
    );
    let i = &j.imports[&key("web")];
    assert_eq!(
        i.ports.iter().map(Port::to_string).collect::<Vec<_>>(),
        ["stcp:142/SCTP", "tcp:42/TCP", "udp:42/UDP"]
    );
    assert_eq!(i.clusters.len(), 3);
    let said: Vec<(&str, &str)> = j
        .problems
        .iter()
        .map(|p| (p.object.as_str(), p.message.as_str()))
        .collect();
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(said[0].1.contains("cluster a exports web with ports [tcp:42/TCP, udp:42/UDP], and other clusters with others; the import has the union of the exports' ports [stcp:142/SCTP, tcp:42/TCP, udp:42/UDP]"), "{said:?}");
    assert!(!said[0].1.contains("port name"), "{said:?}");
    assert!(!said[1].1.contains("port name"), "{said:?}");
    assert!(
        said[2].1.contains(
            "port name \"udp\" is udp:43/UDP here but udp:42/UDP in the older export web-a"
        ),
        "{said:?}"
    );

    // The oldest is a ClusterSetIP export: a headless one of another cluster is left out,
    // and the other way round.
    let j = judge(
        &[
            exported("a", Some("2026-12-04T10:00:00Z"), 80, true),
            exported("c", Some("2026-12-01T10:00:00Z"), 80, false),
        ],
        &all,
        &Naming::default(),
    );
    let i = &j.imports[&key("web")];
    assert!(!i.headless);
    assert_eq!(i.clusters, BTreeSet::from(["c".into()]));
    assert!(
        j.problems[0]
            .message
            .contains("as headless but the oldest export (web-c) is ClusterSetIP"),
        "{:?}",
        j.problems
    );
    let j = judge(
        &[
            exported("a", Some("2026-11-04T10:00:00Z"), 80, true),
            exported("c", Some("2026-12-01T10:00:00Z"), 80, false),
        ],
        &all,
        &Naming::default(),
    );
    let i = &j.imports[&key("web")];
    assert!(i.headless);
    assert_eq!(i.clusters, BTreeSet::from(["a".into()]));
    assert_eq!(j.problems.len(), 1, "{:?}", j.problems);
}

#[test]
fn exported_labels_and_annotations_that_kubernetes_takes_are_kept() {
    let carried: Carried = serde_json::from_value(json!({
        "exportedLabels": {
            "team": "shop",
            "example.com/tier": "gold_1.a",
            "": "x",
            "Example.com/x": "y",
            "a/b/c": "y",
            "ok": "not ok!",
            "long": "a".repeat(64),
            "app.kubernetes.io/managed-by": "someone",
            "empty": "",
        },
        "exportedAnnotations": {"dummy-annotation": "true", "note": "any text, even with spaces", "bad key": "x"},
    }))
    .unwrap();
    let mut said = Vec::new();
    let (labels, annotations) = exported_metadata(&carried, |m| said.push(m));
    assert_eq!(
        labels.keys().map(String::as_str).collect::<Vec<_>>(),
        ["empty", "example.com/tier", "team"]
    );
    assert_eq!(
        annotations.keys().map(String::as_str).collect::<Vec<_>>(),
        ["dummy-annotation", "note"]
    );
    assert_eq!(said.len(), 7, "{said:#?}");
    for part in [
        "exported label =\"x\" is left out of the ServiceImport: the key name \"\" is not",
        "exported label Example.com/x=\"y\" is left out of the ServiceImport: the key prefix \"Example.com\" is not a lower-case DNS subdomain",
        "exported label a/b/c=\"y\" is left out",
        "exported label ok=\"not ok!\" is left out of the ServiceImport: the value is not a label value",
        "exported label long=",
        "exported label app.kubernetes.io/managed-by=\"someone\" is left out of the ServiceImport: the key says whose the ServiceImport is",
        "exported annotation \"bad key\" is left out",
    ] {
        assert!(
            said.iter().any(|m| m.starts_with(part)),
            "{part} in {said:#?}"
        );
    }
    // Past Kubernetes' limit on an object's annotations, none are kept.
    let big: Carried = serde_json::from_value(json!({
        "exportedAnnotations": {"a": "x".repeat(200 * 1024), "b": "y".repeat(100 * 1024)},
    }))
    .unwrap();
    let mut said = Vec::new();
    let (_, annotations) = exported_metadata(&big, |m| said.push(m));
    assert!(annotations.is_empty());
    assert!(
        said[0].contains("more than the 262144 Kubernetes takes"),
        "{said:?}"
    );
}

#[test]
fn the_import_has_the_oldest_exports_labels() {
    let exported = |link: &str, created: &str, team: &str| {
        svc(&format!(
            "metadata: {{name: web-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{created}\",\"exportedLabels\":{{\"team\":\"{team}\"}}}}'}}}}\n\
             spec: {{clusterIP: 198.18.3.9, ports: [{{name: http, port: 80}}]}}"
        ))
    };
    let j = judge(
        &[
            exported("a", "2026-12-04T10:00:00Z", "cart"),
            exported("b", "2026-12-01T10:00:00Z", "shop"),
        ],
        &links(&["a", "b"]),
        &Naming::default(),
    );
    let i = &j.imports[&key("web")];
    assert_eq!(i.metadata()["labels"]["team"], "shop");
    assert_eq!(i.metadata()["labels"][LABEL_MANAGER], MANAGER);
    assert!(i.metadata().get("annotations").is_none());
}

#[test]
fn bad_objects_are_named_and_passed_over() {
    let bad = svc(
        "metadata: {name: x-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: x.other.svc.cluster.local}}\n\
         spec: {clusterIP: 198.18.1.9}",
    );
    let carried = svc(
        "metadata: {name: y-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: y.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{not json'}}\n\
         spec: {clusterIP: 198.18.1.8}",
    );
    let user =
        svc("metadata: {name: web-federated, namespace: shop}\nspec: {clusterIP: 198.18.1.7}");
    let j = judge(
        &[bad, carried, user, mirror("api", "east", "198.18.1.1")],
        &links(&["east"]),
        &Naming::default(),
    );
    assert_eq!(
        j.imports.keys().cloned().collect::<Vec<_>>(),
        vec![key("api"), key("y")]
    );
    assert_eq!(j.problems.len(), 2, "{:?}", j.problems);
    assert!(
        j.problems[0]
            .message
            .contains("not a service in namespace shop")
    );
    assert!(j.problems[1].message.contains("not what a bridge writes"));
}
