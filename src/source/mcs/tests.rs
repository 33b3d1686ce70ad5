use kube::api::DynamicObject;

use super::*;
use crate::model::Protocol;
use crate::source::Classified;
use crate::source::file::tests::{one, read};
use crate::source::object::from_dynamic;

#[test]
fn objects_from_the_api_are_read_from_what_the_client_parsed() {
    let o: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "7",
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"type": "ClusterSetIP", "ips": ["10.0.0.1"], "ports": [{"port": 80}]},
        "status": {"clusters": [{"cluster": "east"}]}
    }))
    .unwrap();
    let c = Imports::default().convert(from_dynamic::<Imports>(o).unwrap(), &Policy::default());
    let Read::Object(i) = c else { panic!("{c:?}") };
    assert_eq!(i.key.to_string(), "shop/web");
    assert_eq!(i.ips, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
    assert_eq!(i.ports.len(), 1);
    // A body that does not have the shape (no schema stopped it) is this object's error.
    let o: DynamicObject = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "odd", "namespace": "shop"},
        "addressType": "IPv4", "endpoints": [{"addresses": "10.0.0.1"}]
    }))
    .unwrap();
    let e = from_dynamic::<Slices>(o).unwrap_err();
    assert_eq!(
        (e.kind, e.object.as_str(), e.reason),
        (ObjectKind::EndpointSlice, "shop/odd", Skip::Malformed)
    );
    assert!(e.message.starts_with("cannot be read: "), "{e}");
}

#[test]
fn import_with_unknown_fields_and_defaults() {
    let c = read(
        &Imports::default(),
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\n\
         spec: {type: ClusterSetIP, ips: [10.0.0.1, 'fd00::1'], ipFamilies: [IPv4], ports: [{port: 80}, {name: Http, protocol: udp, port: 81}]}\nstatus: {clusters: [{cluster: a}]}",
    );
    let Read::Object(i) = c else { panic!("{c:?}") };
    assert_eq!(i.kind, ServiceType::ClusterSetIp);
    assert_eq!(i.ips.len(), 2);
    assert_eq!(
        i.ports[0],
        Port {
            name: None,
            protocol: Protocol::Tcp,
            port: 80
        }
    );
    assert_eq!(
        i.ports[1],
        Port {
            name: Some("http".into()),
            protocol: Protocol::Udp,
            port: 81
        }
    );
}

#[test]
fn unknown_type_is_clustersetip_and_submariner_copies_are_ignored() {
    let c = read(
        &Imports::default(),
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: a, namespace: b}\nspec: {type: Weird, ports: []}",
    );
    assert!(matches!(
        c,
        Read::Object(Import {
            kind: ServiceType::ClusterSetIp,
            ..
        })
    ));
    let c = one(
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: a-b-c, namespace: sub, labels: {multicluster.kubernetes.io/service-name: a}}\nspec: {type: Headless}",
    );
    assert!(matches!(c, Classified::Ignored(_)), "{c:?}");
    let c = one(
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: a, namespace: b, annotations: {multicluster.kubernetes.io/service-name: a}}\nspec: {type: Headless}",
    );
    assert!(matches!(c, Classified::Ignored(_)), "{c:?}");
    // Lighthouse before 0.15: every ServiceImport is one cluster's record
    // `<svc>-<ns>-<cluster>` in its own namespace (agent.go@437a4c2).
    let c = one(
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata:\n  name: web-shop-east\n  namespace: submariner-operator\n  \
         labels: {lighthouse.submariner.io/sourceName: web, lighthouse.submariner.io/sourceNamespace: shop, lighthouse.submariner.io/sourceCluster: east}\n  \
         annotations: {origin-name: web, origin-namespace: shop}\nspec: {type: ClusterSetIP, ips: [198.18.0.1]}",
    );
    assert!(matches!(c, Classified::Ignored(_)), "{c:?}");
}

#[test]
fn bad_objects_name_the_object_and_the_field() {
    let cases = [
        (
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: ClusterSetIP, ips: [10.0.0.300]}",
            "bad_ip",
            "spec.ips[0]",
        ),
        (
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: Web_1, namespace: shop}\nspec: {type: ClusterSetIP}",
            "bad_name",
            "metadata.name",
        ),
        (
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {ports: [{port: 70000}]}",
            "bad_port",
            "spec.ports[0]",
        ),
        (
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {ports: 7}",
            "malformed",
            "cannot be read",
        ),
        (
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: ['fd00::1']}]",
            "bad_ip",
            "endpoints[0].addresses[0]",
        ),
        (
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.1], hostname: 'a.b'}]",
            "bad_hostname",
            "endpoints[0].hostname",
        ),
        (
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web, multicluster.kubernetes.io/source-cluster: a.b.c}}\naddressType: IPv4",
            "bad_cluster",
            "source-cluster",
        ),
        (
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: FQDN",
            "bad_address_type",
            "FQDN",
        ),
    ];
    for (yaml, reason, mention) in cases {
        let Classified::Invalid(e) = one(yaml) else {
            panic!("accepted: {yaml}")
        };
        assert_eq!(e.reason.label(), reason, "{e}");
        assert!(e.to_string().contains(mention), "{e}");
        assert!(e.to_string().contains("shop/"), "{e}");
    }
}

#[test]
fn refused_addresses_are_dropped_alone_and_excluded_namespaces_not_served() {
    let Read::Object(i) = read(
        &Imports::default(),
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\n\
         spec: {type: ClusterSetIP, ips: [169.254.169.254, 10.0.0.1, '::ffff:127.0.0.1'], ports: [{port: 80}]}",
    ) else {
        panic!()
    };
    assert_eq!(i.ips, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
    let refused: Vec<String> = i.refused.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        refused,
        [
            "spec.ips[0] 169.254.169.254 refused (link_local)",
            "spec.ips[2] ::ffff:127.0.0.1 refused (loopback)"
        ]
    );
    let Read::Object(s) = read(
        &Slices,
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\n\
         addressType: IPv4\nendpoints:\n- {addresses: [255.255.255.255], hostname: gone}\n- {addresses: [0.0.0.0, 10.1.0.2], hostname: kept}",
    ) else {
        panic!()
    };
    assert_eq!(
        s.slice.endpoints.len(),
        1,
        "an endpoint with no address left goes"
    );
    assert_eq!(s.slice.endpoints[0].hostname.as_deref(), Some("kept"));
    assert_eq!(
        s.slice.endpoints[0].addresses,
        ["10.1.0.2".parse::<IpAddr>().unwrap()]
    );
    let reasons: Vec<_> = s
        .refused
        .iter()
        .map(|r| (r.field.as_str(), r.reason.label()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("endpoints[0].addresses[0]", "broadcast"),
            ("endpoints[1].addresses[0]", "unspecified")
        ]
    );
    for kind in [
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: dns, namespace: kube-system}\nspec: {type: ClusterSetIP, ips: [10.0.0.1]}",
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: kube-public, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4",
    ] {
        let c = one(kind);
        assert!(
            matches!(&c, Classified::Ignored(w) if w.contains("excluded")),
            "{c:?}"
        );
    }
}

#[test]
fn slices_skip_not_ready_and_keep_absent_ready() {
    let c = read(
        &Slices,
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web, multicluster.kubernetes.io/source-cluster: East.Prod}}\n\
         addressType: IPv4\nports: null\nendpoints:\n- {addresses: [10.0.0.1], conditions: {ready: false}}\n- {addresses: [10.0.0.2]}\n- {addresses: [10.0.0.3], conditions: {ready: true}, hostname: DB-0}",
    );
    let Read::Object(s) = c else { panic!("{c:?}") };
    assert_eq!(s.slice.cluster.as_deref(), Some("east.prod"));
    assert!(s.slice.ports.is_empty());
    assert_eq!(s.slice.endpoints.len(), 2);
    assert_eq!(s.slice.endpoints[1].hostname.as_deref(), Some("db-0"));
}
