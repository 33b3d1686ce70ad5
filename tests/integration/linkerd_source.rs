//! The Kubernetes source reading Linkerd's multicluster Services (`--source linkerd`) from a
//! real API server, in the exact shapes Linkerd's service mirror writes (linkerd2
//! `version-2.20`), through the churn it makes.

use crate::common;

use std::time::Duration;

use crate::kube_source::{cluster, clusterset_ip, status};
use common::k8s::{Cluster, linkerd_rbac};
use common::{Steps, metric_value, ready, short, spawn_binary, until};

/// A Service as Linkerd's service mirror creates it (linkerd2 version-2.20): `labels` and
/// `annotations` as flow-mapping entries, the ClusterIP left to the API server unless headless.
pub(crate) fn linkerd_service(
    ns: &str,
    name: &str,
    labels: &str,
    annotations: &str,
    headless: bool,
) -> String {
    let ip = if headless { "clusterIP: None, " } else { "" };
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         labels: {{mirror.linkerd.io/mirrored-service: 'true', {labels}}}\n  annotations: {{{annotations}}}\n\
         spec: {{{ip}ports: [{{name: http, protocol: TCP, port: 80, targetPort: 80}}]}}\n"
    )
}

/// Link `link`'s mirror of `svc` in `ns`.
pub(crate) fn mirror(ns: &str, svc: &str, link: &str, headless: bool) -> String {
    linkerd_service(
        ns,
        &format!("{svc}-{link}"),
        &format!("mirror.linkerd.io/cluster-name: {link}"),
        &format!(
            "mirror.linkerd.io/remote-svc-fq-name: {svc}.{ns}.svc.cluster.local, mirror.linkerd.io/remote-resource-version: '1'"
        ),
        headless,
    )
}

/// Host `host` of Link `link`'s headless mirror of `svc`: an endpoint mirror.
pub(crate) fn host_mirror(ns: &str, svc: &str, host: &str, link: &str) -> String {
    linkerd_service(
        ns,
        &format!("{host}-{link}"),
        &format!(
            "mirror.linkerd.io/cluster-name: {link}, mirror.linkerd.io/headless-mirror-svc-name: {svc}-{link}"
        ),
        &format!("mirror.linkerd.io/remote-svc-fq-name: {host}.{svc}.{ns}.svc.cluster.local"),
        false,
    )
}

/// The federated Service of `svc` with `remote-discovery: members`.
pub(crate) fn federated(ns: &str, svc: &str, members: &str) -> String {
    linkerd_service(
        ns,
        &format!("{svc}-federated"),
        "app: web",
        &format!("multicluster.linkerd.io/remote-discovery: '{members}'"),
        false,
    )
}

pub(crate) fn cluster_ip(k: &Cluster, ns: &str, name: &str) -> String {
    k.kubectl_out(&[
        "-n",
        ns,
        "get",
        "service",
        name,
        "-o",
        "jsonpath={.spec.clusterIP}",
    ])
}

pub(crate) fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Linkerd's objects in a real API server, in their exact shapes, and the churn the service
/// mirror makes: a member joins and leaves a federated Service, the last one leaves, a mirror is
/// deleted, a headless host comes and goes, a whole Link goes away, and a ServiceImport claims
/// a name a federated Service gives. The binary runs as a user with the role of both sources
/// (deploy/linkerd's and deploy/base's rules).
#[test]
fn linkerd_source_against_a_real_api_server() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();
    let mut k = cluster("v1beta1", linkerd_rbac(), &["shop", "data"]);
    steps.next("1. Linkerd's objects, listed");
    // A Service that is not Linkerd's: never read (the watch's label selector leaves it out).
    k.apply("apiVersion: v1\nkind: Service\nmetadata: {name: plain, namespace: shop}\nspec: {ports: [{port: 80}]}\n");
    k.apply(
        &(federated("shop", "web", "web@east")
            + &mirror("shop", "web", "east", false)
            + &mirror("shop", "web", "west", false)
            + &mirror("shop", "api", "east", false)
            + &mirror("shop", "api", "west", false)
            + &mirror("data", "db", "east", true)
            + &host_mirror("data", "db", "db-0", "east")
            + &host_mirror("data", "db", "db-1", "east")
            + &mirror("data", "db", "west", true)
            + &host_mirror("data", "db", "db-0", "west")),
    );
    let web = cluster_ip(&k, "shop", "web-federated");
    let (web_east, web_west) = (
        cluster_ip(&k, "shop", "web-east"),
        cluster_ip(&k, "shop", "web-west"),
    );
    let (api_east, api_west) = (
        cluster_ip(&k, "shop", "api-east"),
        cluster_ip(&k, "shop", "api-west"),
    );
    let (db0_east, db1_east, db0_west) = (
        cluster_ip(&k, "data", "db-0-east"),
        cluster_ip(&k, "data", "db-1-east"),
        cluster_ip(&k, "data", "db-0-west"),
    );

    let s = spawn_binary(&[
        "--kubeconfig",
        &k.kubeconfig("dns"),
        "--source",
        "mcs,linkerd",
        "--linkerd-mirrors",
        "--linkerd-cluster-id",
        "west=west.eu",
    ]);
    until("ready", 30, || ready(&s));
    assert_eq!(
        short(s.dns, "web.shop.svc.clusterset.local"),
        vec![web.clone()]
    );
    assert_eq!(
        short(s.dns, "api.shop.svc.clusterset.local"),
        sorted(vec![api_east.clone(), api_west.clone()])
    );
    assert_eq!(
        short(s.dns, "db.data.svc.clusterset.local"),
        sorted(vec![db0_east.clone(), db1_east.clone(), db0_west.clone()])
    );
    assert_eq!(
        short(s.dns, "db-1.east.db.data.svc.clusterset.local"),
        vec![db1_east.clone()]
    );
    assert_eq!(
        short(s.dns, "db-0.west.eu.db.data.svc.clusterset.local"),
        vec![db0_west.clone()]
    );
    assert_eq!(
        short(s.dns, "SRV _http._tcp.db.data.svc.clusterset.local").len(),
        3
    );
    assert_eq!(status(s.dns, "plain.shop.svc.clusterset.local"), "NXDOMAIN");
    assert_eq!(
        status(s.dns, "web-federated.shop.svc.clusterset.local"),
        "NXDOMAIN"
    );
    assert_eq!(
        metric_value(&s, "clusterset_dns_source_objects{kind=\"Service\"}"),
        10.0
    );

    steps.next("2. a member joins the federated Service");
    // A member joins the federated Service (an annotation edit): the same name and address.
    k.apply(&federated("shop", "web", "web@east,web@west"));
    steps.next("3. the last member leaves");
    // The last member leaves: the annotation empties (the object is now skipped, counted), and
    // web answers from its mirrors; the service mirror then deletes the object.
    k.apply(&federated("shop", "web", ""));
    until(
        "web from its mirrors once its federated Service names nothing",
        10,
        || {
            short(s.dns, "web.shop.svc.clusterset.local")
                == sorted(vec![web_east.clone(), web_west.clone()])
        },
    );
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_skipped_objects_total{kind=\"Service\",reason=\"no_members\"}"
        ),
        1.0
    );
    k.delete("service", "shop", "web-federated");
    steps.next("4. a member joins again");
    // A member joins again: the service mirror creates the federated Service anew.
    k.apply(&federated("shop", "web", "web@west"));
    let web = cluster_ip(&k, "shop", "web-federated");
    until("web from its new federated Service", 10, || {
        short(s.dns, "web.shop.svc.clusterset.local") == vec![web.clone()]
    });

    steps.next("5. a mirror is deleted");
    // A mirror is deleted.
    k.delete("service", "shop", "api-west");
    until("api without the west mirror", 10, || {
        short(s.dns, "api.shop.svc.clusterset.local") == vec![api_east.clone()]
    });

    steps.next("6. a headless host comes and goes");
    // A headless host is added, then removed.
    k.apply(&host_mirror("data", "db", "db-2", "east"));
    let db2_east = cluster_ip(&k, "data", "db-2-east");
    until("the new host", 10, || {
        short(s.dns, "db-2.east.db.data.svc.clusterset.local") == vec![db2_east.clone()]
    });
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local").len(), 4);
    k.delete("service", "data", "db-2-east");
    until("the host gone", 10, || {
        status(s.dns, "db-2.east.db.data.svc.clusterset.local") == "NXDOMAIN"
    });

    steps.next("7. a ServiceImport claims web");
    // A ServiceImport claims web: it is served, and the conflict is logged once and counted.
    k.apply(&clusterset_ip("web", "198.19.30.1"));
    until("the ServiceImport wins", 10, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["198.19.30.1"]
    });
    let conflicts = "clusterset_dns_skipped_objects_total{kind=\"Service\",reason=\"conflict\"}";
    assert_eq!(metric_value(&s, conflicts), 1.0);
    // Another change to the federated Service is not a second report.
    k.apply(&federated("shop", "web", "web@west,web@east"));
    k.apply(&clusterset_ip("marker", "198.19.30.9"));
    until("a later change applied", 10, || {
        short(s.dns, "marker.shop.svc.clusterset.local") == ["198.19.30.9"]
    });
    assert_eq!(metric_value(&s, conflicts), 1.0);
    assert!(
        s.logged("the ServiceImport shop/web gives the same names"),
        "conflict logged"
    );
    k.delete("serviceimport", "shop", "web");
    until("web from Linkerd again", 10, || {
        short(s.dns, "web.shop.svc.clusterset.local") == vec![web.clone()]
    });

    steps.next("8. a whole Link goes away");
    // A whole Link goes away: the service mirror deletes all of its mirrors at once.
    assert!(k.kubectl_ok(&[
        "delete",
        "service",
        "--all-namespaces",
        "-l",
        "mirror.linkerd.io/cluster-name=west",
        "--wait=false"
    ]));
    until("west gone", 10, || {
        status(s.dns, "db-0.west.eu.db.data.svc.clusterset.local") == "NXDOMAIN"
    });
    assert_eq!(
        short(s.dns, "db.data.svc.clusterset.local"),
        sorted(vec![db0_east.clone(), db1_east.clone()])
    );
    assert_eq!(
        short(s.dns, "api.shop.svc.clusterset.local"),
        vec![api_east.clone()]
    );
    // The federated Service still names west: still served (Linkerd edits it separately).
    assert_eq!(
        short(s.dns, "web.shop.svc.clusterset.local"),
        vec![web.clone()]
    );

    steps.next("9. the API server dies and comes back");
    // The API server dies: answers go on, and ready; it comes back: changes flow again.
    k.kill_api();
    for _ in 0..10 {
        assert_eq!(
            short(s.dns, "web.shop.svc.clusterset.local"),
            vec![web.clone()]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready(&s), "still ready while serving the last known zone");
    k.start_api();
    k.apply(&mirror("shop", "api", "west", false));
    let api_west = cluster_ip(&k, "shop", "api-west");
    until("a mirror added after the API server restart", 60, || {
        short(s.dns, "api.shop.svc.clusterset.local")
            == sorted(vec![api_east.clone(), api_west.clone()])
    });
    assert!(
        metric_value(&s, "clusterset_dns_source_errors_total{kind=\"Service\"}") >= 1.0,
        "watch failures are counted"
    );
    drop(s);

    steps.next("10. Linkerd alone, in a cluster with no MCS CRDs");
    // Linkerd alone, in a cluster with no MCS CRDs: no discovery of them, ready, and without
    // --linkerd-mirrors a service with only mirrors has no name.
    k.kubectl_ok(&["delete", "crd", "serviceimports.multicluster.x-k8s.io"]);
    let s = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns"), "--source", "linkerd"]);
    until("ready on Linkerd's Services alone", 30, || ready(&s));
    assert_eq!(
        short(s.dns, "web.shop.svc.clusterset.local"),
        vec![web.clone()]
    );
    assert_eq!(status(s.dns, "api.shop.svc.clusterset.local"), "NXDOMAIN");
    assert_eq!(
        short(s.dns, "db-0.east.db.data.svc.clusterset.local"),
        [db0_east]
    );
}
