//! `clusterset-dns linkerd-bridge`, the export half, against a real API server with the MCS CRDs
//! of deploy/crds: each ServiceExport gives its Service Linkerd's label and gets the conditions
//! of sigs.k8s.io/mcs-api v0.5.2, through every change a user makes.

use crate::common;

use std::process::{Child, Command, Stdio};

use common::k8s::Cluster;
use common::wait::value;
use common::{Steps, until};
use serde_json::Value;

pub(crate) const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crds");

/// The bridge, run as a user runs it; its log is in `log` and shown when a wait fails.
pub(crate) struct Bridge {
    pub(crate) child: Child,
    log: std::path::PathBuf,
    pub(crate) admin: std::net::SocketAddr,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bridge {
    pub(crate) fn start(k: &Cluster, args: &[&str]) -> Bridge {
        Bridge::start_via(k, &k.kubeconfig("dns"), args)
    }

    /// [`Bridge::start`] with another kubeconfig (one through a proxy).
    pub(crate) fn start_via(k: &Cluster, kubeconfig: &str, args: &[&str]) -> Bridge {
        let admin: std::net::SocketAddr = format!("127.0.0.1:{}", common::k8s::free_port())
            .parse()
            .unwrap();
        let log = k.dir.path().join(format!("bridge-{}.log", admin.port()));
        let child = Command::new(common::BIN)
            .args(["linkerd-bridge", "--kubeconfig", kubeconfig])
            .args(["--admin-listen", &admin.to_string()])
            .args(["--lease-namespace", "shop", "--lease-duration", "3s"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Bridge { child, log, admin }
    }

    pub(crate) fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `path` on the admin server: the status and the body (0 and "" while nothing answers).
    pub(crate) fn admin(&self, path: &str) -> (u16, String) {
        common::http_get_blocking(self.admin, path, std::time::Duration::from_secs(2))
            .unwrap_or_default()
    }
}

/// The user the bridge runs as (kubeconfig `dns`): bound to deploy/linkerd-bridge's roles by
/// [`bridge_rbac`].
const USER: &str = "clusterset-dns";

/// deploy/linkerd-bridge's ClusterRole and Role (the Lease's, here in namespace `shop`), bound to
/// [`USER`] instead of the ServiceAccount: the bridge does its work with exactly these grants.
pub(crate) fn bridge_rbac() -> String {
    // The Links' namespace, where the credentials' Role is.
    let mut out = "apiVersion: v1\nkind: Namespace\nmetadata: {name: linkerd-multicluster}\n---\n"
        .to_string();
    for mut o in common::yaml_objects(&common::kustomize("deploy/linkerd-bridge")) {
        let binding = match o["kind"].as_str().unwrap() {
            "ClusterRole" => "ClusterRoleBinding",
            "Role" => {
                // The Lease's Role, here in namespace shop; the credentials' stays in
                // linkerd-multicluster.
                if o["metadata"]["namespace"] != "linkerd-multicluster" {
                    o["metadata"]["namespace"] = "shop".into();
                }
                "RoleBinding"
            }
            _ => continue,
        };
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        let ns = o["metadata"]["namespace"]
            .as_str()
            .unwrap_or("shop")
            .to_string();
        out += &serde_yaml_ng::to_string(&o).unwrap();
        out += &format!(
            "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: {binding}\nmetadata: {{name: {name}-test, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {}, name: {name}}}\n\
             subjects:\n- {{kind: User, name: {USER}, apiGroup: rbac.authorization.k8s.io}}\n---\n",
            o["kind"].as_str().unwrap()
        );
    }
    out
}

/// A cluster with deploy/crds' ServiceExport CRD (unless `crds` is false), namespace `shop`,
/// the bridge's role, and a ClusterProperty that names it `north`, read by the bridge.
fn bridge_cluster(crds: bool) -> Cluster {
    let k = Cluster::start();
    k.apply(&std::fs::read_to_string(format!("{CRDS}/clusterproperty.yaml")).unwrap());
    k.apply(
        "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {name: cluster.clusterset.k8s.io}\nspec: {value: north}\n",
    );
    if crds {
        let crd = format!("{CRDS}/multicluster.x-k8s.io_serviceexports.yaml");
        k.apply(&std::fs::read_to_string(crd).unwrap());
    }
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n");
    k.apply(&bridge_rbac());
    k
}

pub(crate) fn get(k: &Cluster, kind: &str, name: &str) -> Option<Value> {
    let out = k
        .kubectl()
        .args(["get", kind, "-n", "shop", name, "-o", "json"])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The Events with `reason` in `ns`, as the API server gives them.
fn event_objects(k: &Cluster, ns: &str, reason: &str) -> Vec<Value> {
    let out = k
        .kubectl()
        .args([
            "get",
            "events.events.k8s.io",
            "-n",
            ns,
            "--field-selector",
            &format!("reason={reason}"),
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The Events with `reason` in `ns`, each as `<object>: <note>`.
pub(crate) fn events(k: &Cluster, ns: &str, reason: &str) -> Vec<String> {
    event_objects(k, ns, reason)
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["regarding"]["name"].as_str().unwrap_or("?"),
                e["note"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The Service's labels that start with `mirror.linkerd.io/`, as `key=value`.
fn linkerd_labels(k: &Cluster, name: &str) -> Vec<String> {
    let svc = get(k, "service", name).unwrap_or_default();
    let labels = svc["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels
        .iter()
        .filter(|(key, _)| key.starts_with("mirror.linkerd.io/"))
        .map(|(key, v)| format!("{key}={}", v.as_str().unwrap()))
        .collect()
}

/// The export's conditions as `Type=Status/Reason`, in order, and the messages by type.
fn conditions(k: &Cluster, name: &str) -> (Vec<String>, Value) {
    let se = get(k, "serviceexport", name).unwrap_or_default();
    let list = se["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let generation = se["metadata"]["generation"].clone();
    let summary = list
        .iter()
        .map(|c| {
            // A condition of an older generation does not count as said.
            let stale = if c["observedGeneration"] == generation {
                ""
            } else {
                " (stale)"
            };
            format!(
                "{}={}/{}{stale}",
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
        .collect();
    let messages = list
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_string(),
                c["message"].clone(),
            )
        })
        .collect::<serde_json::Map<_, _>>();
    (summary, Value::Object(messages))
}

fn service(name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\nspec: {spec}\n"
    )
}

const HTTP: &str = "{ports: [{name: http, protocol: TCP, port: 80}]}";

fn export(name: &str, mode: Option<&str>) -> String {
    let annotations = mode.map_or(String::new(), |m| {
        format!(", annotations: {{linkerd-bridge.clusterset-dns.io/mode: '{m}'}}")
    });
    format!(
        "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: shop{annotations}}}\n"
    )
}

/// Waits until the Service `name` carries exactly `labels` of Linkerd's and the export's
/// conditions read `conds` (empty: no export).
fn settles(k: &Cluster, bridge: &Bridge, name: &str, labels: &[&str], conds: &[&str]) -> Value {
    let last = std::cell::RefCell::new(String::new());
    value(
        common::wait::Lazy(|| {
            format!(
                "{name}: labels {labels:?}, conditions {conds:?}; last {}\nready: {:?}\nbridge log:\n{}",
                last.borrow(),
                bridge.admin("/ready"),
                bridge.log()
            )
        }),
        20,
        || {
            let (have_labels, (have_conds, messages)) =
                (linkerd_labels(k, name), conditions(k, name));
            *last.borrow_mut() = format!("{have_labels:?} {have_conds:?}");
            (have_labels == labels && have_conds == conds).then_some(messages)
        },
    )
}

#[test]
fn exports_become_linkerd_labels_and_conditions() {
    let _module = common::module(module_path!());
    let k = bridge_cluster(true);
    // The export half alone needs only its own role: the import half's (which alone may read
    // EndpointSlices) is not bound.
    let import_role = "clusterset-dns-linkerd-bridge-import-test";
    k.delete("clusterrolebinding", "shop", import_role);
    k.apply(&service("web", HTTP));
    let bridge = Bridge::start(&k, &["--halves", "export", "--resync", "1s"]);
    let mut steps = Steps::default();
    let federated = "mirror.linkerd.io/federated=member";
    let valid = [
        "Valid=True/Valid",
        "Ready=True/Exported",
        "Conflict=Unknown/NoPeers",
    ];

    steps.next(
        "an export labels its Service federated; Ready says how, Conflict that no peer is seen",
    );
    k.apply(&export("web", None));
    let m = settles(&k, &bridge, "web", &[federated], &valid);
    assert!(m["Ready"].as_str().unwrap().contains(federated), "{m}");
    assert!(
        m["Conflict"]
            .as_str()
            .unwrap()
            .contains("no Link's credentials could be read"),
        "{m}"
    );

    steps.next("the Service carries what the import half needs and Linkerd does not copy");
    let carried = |name: &str| -> Value {
        let svc = get(&k, "service", name).unwrap();
        let text = svc["metadata"]["annotations"]["linkerd-bridge.clusterset-dns.io/export"]
            .as_str()
            .map(str::to_string);
        text.map_or(Value::Null, |t| serde_json::from_str(&t).unwrap())
    };
    let c = carried("web");
    let created = get(&k, "serviceexport", "web").unwrap()["metadata"]["creationTimestamp"].clone();
    assert_eq!(c["exportCreated"], created, "{c}");
    assert_eq!(c["sessionAffinity"], "None", "{c}");
    assert_eq!(
        (&c["version"], &c["cluster"]),
        (&1.into(), &"north".into()),
        "{c}"
    );
    assert_eq!(
        c["ports"],
        serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP"}])
    );
    k.apply(&service(
        "web",
        "{sessionAffinity: ClientIP, ports: [{name: http, protocol: TCP, port: 80, appProtocol: kubernetes.io/h2c}]}",
    ));
    until(
        common::wait::Lazy(|| format!("web to carry its new fields: {}", carried("web"))),
        20,
        || {
            let c = carried("web");
            c["sessionAffinity"] == "ClientIP"
                && c["ports"][0]["appProtocol"] == "kubernetes.io/h2c"
        },
    );

    steps
        .next("the status is written only when it changes (a resync a second finds nothing to do)");
    let rv = |name| get(&k, "serviceexport", name).unwrap()["metadata"]["resourceVersion"].clone();
    let before = rv("web");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(rv("web"), before, "{}", bridge.log());

    steps.next("the mode annotation moves the label: gateway, then remote-discovery");
    k.apply(&export("web", Some("gateway")));
    settles(
        &k,
        &bridge,
        "web",
        &["mirror.linkerd.io/exported=true"],
        &valid,
    );
    k.apply(&export("web", Some("remote-discovery")));
    settles(
        &k,
        &bridge,
        "web",
        &["mirror.linkerd.io/exported=remote-discovery"],
        &valid,
    );

    steps.next("an annotation the bridge cannot read keeps the label and says what is wrong");
    k.apply(&export("web", Some("mirror-please")));
    let m = settles(
        &k,
        &bridge,
        "web",
        &["mirror.linkerd.io/exported=remote-discovery"],
        &["Valid=False/InvalidMode", "Ready=False/Failed"],
    );
    assert!(
        m["Valid"].as_str().unwrap().contains("\"mirror-please\""),
        "{m}"
    );

    steps.next("a headless Service: remote-discovery by default (the bridges import its endpoints); federated is refused");
    k.apply(&service(
        "keep",
        "{clusterIP: None, ports: [{name: http, port: 80}]}",
    ));
    k.apply(&export("keep", None));
    let m = settles(
        &k,
        &bridge,
        "keep",
        &["mirror.linkerd.io/exported=remote-discovery"],
        &[
            "Valid=True/Valid",
            "Ready=True/Exported",
            "Conflict=Unknown/NoPeers",
        ],
    );
    assert!(
        m["Ready"]
            .as_str()
            .unwrap()
            .contains("import its endpoints"),
        "{m}"
    );
    k.apply(&export("keep", Some("federated")));
    settles(
        &k,
        &bridge,
        "keep",
        &[],
        &["Valid=False/InvalidServiceType", "Ready=False/Failed"],
    );

    steps.next("an export before its Service: NoService, then labelled once the Service comes");
    k.apply(&export("late", None));
    let m = settles(
        &k,
        &bridge,
        "late",
        &[],
        &["Valid=False/NoService", "Ready=False/Pending"],
    );
    assert!(m["Valid"].as_str().unwrap().contains("shop/late"), "{m}");
    k.apply(&service("late", HTTP));
    settles(&k, &bridge, "late", &[federated], &valid);
    // What the conditions turned to is said in Events on the ServiceExport too.
    until("the NoService and Exported Events on late", 10, || {
        let said = |reason: &str, note: &str| {
            events(&k, "shop", reason)
                .iter()
                .any(|e| e.starts_with(&format!("late: {note}")))
        };
        said("NoService", "Service shop/late does not exist")
            && said("Exported", "labelled mirror.linkerd.io/federated=member")
    });

    steps.next("a Service turned ExternalName loses the label and the export is not valid");
    k.apply(&service(
        "late",
        "{type: ExternalName, externalName: db.example.org}",
    ));
    settles(
        &k,
        &bridge,
        "late",
        &[],
        &["Valid=False/InvalidServiceType", "Ready=False/Failed"],
    );

    steps.next("exported again: the second Exported Event on late is the first one's series");
    k.apply(&service("late", HTTP));
    settles(&k, &bridge, "late", &[federated], &valid);
    // As client-go's recorder writes a repeat: one Event, its series counting two.
    let exported_on_late = || -> Vec<Value> {
        let mut said = event_objects(&k, "shop", "Exported");
        said.retain(|e| e["regarding"]["name"] == "late");
        said
    };
    until("the Exported Event on late counting two", 10, || {
        let said = exported_on_late();
        said.len() == 1 && said[0]["series"]["count"] == 2
    });
    let said = exported_on_late();
    assert!(
        said[0]["series"]["lastObservedTime"].is_string()
            && said[0]["reportingController"] == "linkerd-bridge.clusterset-dns.io",
        "{said:?}"
    );

    steps.next("a mirror of the same service from cluster west: no conflict, then a port conflict, then a type conflict");
    k.apply(&export("web", None));
    settles(&k, &bridge, "web", &[federated], &valid);
    let mirror = |spec: &str| {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web-west\n  namespace: shop\n  \
             labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: west}}\n  \
             annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local}}\nspec: {spec}\n"
        )
    };
    k.apply(&mirror(HTTP));
    let no_conflict = [
        "Valid=True/Valid",
        "Ready=True/Exported",
        "Conflict=False/NoConflicts",
    ];
    let m = settles(&k, &bridge, "web", &[federated], &no_conflict);
    assert!(m["Conflict"].as_str().unwrap().contains("west"), "{m}");
    k.apply(&mirror(
        "{ports: [{name: http, protocol: TCP, port: 8080}]}",
    ));
    let m = settles(
        &k,
        &bridge,
        "web",
        &[federated],
        &[
            "Valid=True/Valid",
            "Ready=True/Exported",
            "Conflict=True/PortConflict",
        ],
    );
    let said = m["Conflict"].as_str().unwrap();
    assert!(
        said.contains("cluster west") && said.contains("http:8080/TCP"),
        "{m}"
    );
    until("the Conflict Event on web", 10, || {
        events(&k, "shop", "Conflict").iter().any(|e| {
            e.starts_with(
                "web: PortConflict: cluster west (mirror web-west) has ports [http:8080/TCP]",
            )
        })
    });
    // What the export halves carry is compared as well: west's export (as its export half
    // writes it, and Linkerd copies it onto the mirror) has no session affinity where this
    // one has ClientIP (given above), and other exportedLabels.
    k.apply(&export("web", None).replace(
        "namespace: shop}\n",
        "namespace: shop}\nspec: {exportedLabels: {team: shop}}\n",
    ));
    let west = r#"{"exportCreated":"2026-12-01T10:00:00Z","sessionAffinity":"None","internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ports":[{"name":"http","port":80,"protocol":"TCP","appProtocol":null}],"exportedLabels":{"team":"cart"}}"#;
    k.apply(&mirror(HTTP).replace(
        "remote-svc-fq-name: web.shop.svc.cluster.local",
        &format!("remote-svc-fq-name: web.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{west}'"),
    ));
    let m = settles(
        &k,
        &bridge,
        "web",
        &[federated],
        &[
            "Valid=True/Valid",
            "Ready=True/Exported",
            "Conflict=True/LabelsConflict,SessionAffinityConfigConflict,SessionAffinityConflict",
        ],
    );
    let said = m["Conflict"].as_str().unwrap();
    assert!(
        said.contains(r#"has exportedLabels {"team":"cart"}, this one {"team":"shop"}"#),
        "{m}"
    );
    assert_eq!(
        carried("web")["exportedLabels"],
        serde_json::json!({"team": "shop"}),
        "the export's labels carried for the import half"
    );
    k.apply(&export("web", None));
    k.delete("service", "shop", "web-west");
    k.apply(
        &mirror(&format!("{{clusterIP: None, {}", &HTTP[1..]))
            .replace("web-west", "web-south")
            .replace("cluster-name: west", "cluster-name: south"),
    );
    settles(
        &k,
        &bridge,
        "web",
        &[federated],
        &[
            "Valid=True/Valid",
            "Ready=True/Exported",
            "Conflict=True/TypeConflict",
        ],
    );
    k.delete("service", "shop", "web-south");
    settles(&k, &bridge, "web", &[federated], &valid);

    steps.next("a label set by hand to another value is not overridden: Ready=False names it");
    k.apply(&service("pay", HTTP));
    assert!(k.kubectl_ok(&[
        "label",
        "service",
        "-n",
        "shop",
        "pay",
        "mirror.linkerd.io/exported=false"
    ]));
    k.apply(&export("pay", Some("gateway")));
    let m = settles(
        &k,
        &bridge,
        "pay",
        &["mirror.linkerd.io/exported=false"],
        &[
            "Valid=True/Valid",
            "Ready=False/Failed",
            "Conflict=Unknown/NoPeers",
        ],
    );
    assert!(
        m["Ready"]
            .as_str()
            .unwrap()
            .contains("mirror.linkerd.io/exported"),
        "{m}"
    );

    steps.next("the metrics count what was done and show each export's conditions");
    // The gauges that walk every object are counted at most once a second.
    until(
        common::wait::Lazy(|| bridge.admin("/metrics").1),
        10,
        || {
            common::metric_in(
                &bridge.admin("/metrics").1,
                r#"clusterset_dns_bridge_managed{kind="ServiceExport"}"#,
            ) == 4.0
        },
    );
    let (status, scrape) = bridge.admin("/metrics");
    assert_eq!(status, 200);
    common::promtool_check(&scrape);
    let series = |s: &str| common::metric_in(&scrape, s);
    assert_eq!(
        series(
            r#"clusterset_dns_bridge_export_condition{namespace="shop",serviceexport="pay",condition="Ready",status="False"}"#
        ),
        1.0,
        "{scrape}"
    );
    assert_eq!(
        series(
            r#"clusterset_dns_bridge_export_condition{namespace="shop",serviceexport="web",condition="Ready",status="True"}"#
        ),
        1.0,
        "{scrape}"
    );
    // web's earlier Conflict=True series went when it cleared.
    assert!(
        !scrape.contains(r#"serviceexport="web",condition="Conflict",status="True""#),
        "{scrape}"
    );
    assert!(
        series(r#"clusterset_dns_bridge_reconciles_total{half="export",result="success"}"#) > 10.0
    );
    // Every reconcile is timed; the waits of those a watch marked too.
    let runs = series(r#"clusterset_dns_bridge_reconciles_total{half="export",result="success"}"#)
        + series(r#"clusterset_dns_bridge_reconciles_total{half="export",result="error"}"#);
    assert_eq!(
        series(r#"clusterset_dns_bridge_reconcile_duration_seconds_count{half="export"}"#),
        runs,
        "{scrape}"
    );
    let waited = series(r#"clusterset_dns_bridge_queue_duration_seconds_count{half="export"}"#);
    assert!(waited > 0.0, "{scrape}");
    assert_eq!(
        series(r#"clusterset_dns_bridge_managed{kind="ServiceExport"}"#),
        4.0,
        "{scrape}"
    );
    assert_eq!(bridge.admin("/ready").0, 200);

    steps.next("deleting an export takes off only what the bridge put on");
    k.apply(&service("db", HTTP));
    assert!(k.kubectl_ok(&["label", "service", "-n", "shop", "db", federated]));
    k.apply(&export("db", None));
    settles(&k, &bridge, "db", &[federated], &valid);
    k.delete("serviceexport", "shop", "db");
    k.delete("serviceexport", "shop", "web");
    settles(&k, &bridge, "web", &[], &[]);
    assert_eq!(carried("web"), Value::Null);
    // The hand-set label of db stays.
    until("db's own label to stay", 3, || {
        linkerd_labels(&k, "db") == [federated]
    });
    assert!(!bridge.log().contains("panicked"), "{}", bridge.log());
}

/// Without the ServiceExport CRD the bridge says which CRD is missing and where to get it, in
/// its log and on `/ready`, instead of crash-looping; once the CRD is installed it serves.
#[test]
fn without_the_crds_the_bridge_says_what_to_install_and_waits() {
    let _module = common::module(module_path!());
    let k = bridge_cluster(false);
    k.apply(&service("web", HTTP));
    let mut bridge = Bridge::start(&k, &["--halves", "export"]);
    let body = value(
        common::wait::Lazy(|| format!("/ready to say why\n{}", bridge.log())),
        20,
        || {
            let (status, body) = bridge.admin("/ready");
            (status == 503 && body.contains("serves no ServiceExport")).then_some(body)
        },
    );
    assert!(
        body.contains("deploy/crds/multicluster.x-k8s.io_serviceexports.yaml"),
        "{body}"
    );
    until("the log to say it", 5, || {
        bridge.log().contains("serves no ServiceExport")
    });
    assert_eq!(bridge.admin("/health").0, 200);
    k.apply(
        &std::fs::read_to_string(format!("{CRDS}/multicluster.x-k8s.io_serviceexports.yaml"))
            .unwrap(),
    );
    until(
        common::wait::Lazy(|| format!("ready once the CRD is there\n{}", bridge.log())),
        30,
        || bridge.admin("/ready").0 == 200,
    );
    k.apply(&export("web", None));
    settles(
        &k,
        &bridge,
        "web",
        &["mirror.linkerd.io/federated=member"],
        &[
            "Valid=True/Valid",
            "Ready=True/Exported",
            "Conflict=Unknown/NoPeers",
        ],
    );
    assert!(
        bridge.child.try_wait().unwrap().is_none(),
        "{}",
        bridge.log()
    );
}

/// Two replicas: one leads and writes, the other keeps watching; when the leader dies the other
/// takes over once the Lease expires, and a replica that stops gives the Lease up at once.
#[test]
fn replicas_take_turns_through_the_lease() {
    let _module = common::module(module_path!());
    let k = bridge_cluster(true);
    for name in ["web", "db", "pay"] {
        k.apply(&service(name, HTTP));
    }
    let leader =
        |b: &Bridge| common::metric_in(&b.admin("/metrics").1, "clusterset_dns_bridge_leader");
    let valid = [
        "Valid=True/Valid",
        "Ready=True/Exported",
        "Conflict=Unknown/NoPeers",
    ];
    let federated = ["mirror.linkerd.io/federated=member"];
    let mut a = Bridge::start(&k, &["--halves", "export"]);
    until(
        common::wait::Lazy(|| format!("a to lead\n{}", a.log())),
        10,
        || leader(&a) == 1.0,
    );
    let b = Bridge::start(&k, &["--halves", "export"]);
    until(
        common::wait::Lazy(|| format!("b to be ready\n{}", b.log())),
        10,
        || b.admin("/ready").0 == 200,
    );
    assert_eq!(leader(&b), 0.0);
    k.apply(&export("web", None));
    settles(&k, &a, "web", &federated, &valid);
    assert!(!b.log().contains("Service labelled"), "{}", b.log());

    // SIGKILL: no chance to give the Lease up; b takes it once it expires (3 s).
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = std::time::Instant::now();
    until(
        common::wait::Lazy(|| format!("b to lead\n{}", b.log())),
        10,
        || leader(&b) == 1.0,
    );
    let took = killed.elapsed();
    assert!(
        took >= std::time::Duration::from_secs(1),
        "b took over {took:?} after a died: before the Lease expired"
    );
    k.apply(&export("db", None));
    settles(&k, &b, "db", &federated, &valid);

    // SIGTERM: b gives the Lease up, and c leads at its first look.
    let holder = || {
        let out = k
            .kubectl()
            .args([
                "get",
                "lease",
                "-n",
                "shop",
                "clusterset-dns-linkerd-bridge",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(!holder().is_empty());
    assert!(
        Command::new("kill")
            .args(["-TERM", &b.child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    until(
        common::wait::Lazy(|| format!("b to give up the Lease\n{}", b.log())),
        10,
        || holder().is_empty(),
    );
    let c = Bridge::start(&k, &["--halves", "export"]);
    until(
        common::wait::Lazy(|| format!("c to lead\n{}", c.log())),
        5,
        || leader(&c) == 1.0,
    );
    k.apply(&export("pay", None));
    settles(&k, &c, "pay", &federated, &valid);
    assert!(
        b.log().contains("not leading") || b.log().contains("shutting down"),
        "{}",
        b.log()
    );
}

/// deploy/crds ships the MCS CRDs of sigs.k8s.io/mcs-api v0.5.2 unchanged: the files of the
/// module tests/mcs/setup.sh builds from.
#[test]
fn the_shipped_mcs_crds_are_the_modules_own() {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcs/setup.sh"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let dir = String::from_utf8(out.stdout).unwrap();
    for crd in ["serviceexports", "serviceimports"] {
        let file = format!("multicluster.x-k8s.io_{crd}.yaml");
        assert_eq!(
            std::fs::read_to_string(format!("{CRDS}/{file}")).unwrap(),
            std::fs::read_to_string(format!("{}/crds/{file}", dir.trim())).unwrap(),
            "{file}"
        );
    }
}
