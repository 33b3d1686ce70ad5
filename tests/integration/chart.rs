//! The Helm chart (deploy/helm): it lints, renders deploy/base's and deploy/linkerd's objects
//! with the matching values, and every combination of a table of values validates, takes only
//! real flags, grants exactly what its flags read and says what was asked.

use crate::common;

use std::path::Path;

use crate::deploy::{container, flags_exist, grants, read_by_flags, render, validate};
use common::{kustomize as render_dir, yaml_objects as objects};

const CHART: &str = "deploy/helm/clusterset-dns";

/// `helm template` of the chart as release `clusterset-dns` in namespace clusterset-dns, with
/// these `--set` values.
fn helm_template(home: &Path, set: &[&str]) -> String {
    let mut c = common::helm(home);
    c.args([
        "template",
        "clusterset-dns",
        CHART,
        "--namespace",
        "clusterset-dns",
    ]);
    for s in set {
        c.args(["--set", s]);
    }
    let out = c.output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm template {set:?}: {}",
        common::output_text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_chart_lints() {
    let _module = common::module(module_path!());
    let home = tempfile::tempdir().unwrap();
    let out = common::helm(home.path())
        .args(["lint", "--strict", CHART])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    // The chart's copies of the alerts, the kube-state-metrics configuration and the dashboard
    // are deploy/monitoring's, word for word.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (copy, of) in [
        ("files/rules.yaml", "deploy/monitoring/rules.yaml"),
        ("files/mcs-rules.yaml", "deploy/monitoring/mcs/rules.yaml"),
        (
            "files/mcs-kube-state-metrics.yaml",
            "deploy/monitoring/mcs/kube-state-metrics.yaml",
        ),
        (
            "files/mcs-dashboard.json",
            "deploy/monitoring/mcs/dashboard.json",
        ),
    ] {
        assert_eq!(
            std::fs::read_to_string(root.join(CHART).join(copy)).unwrap(),
            std::fs::read_to_string(root.join(of)).unwrap(),
            "{copy} is a copy of {of}"
        );
    }
}

/// An object with what differs between a kustomize base and a Helm chart by design taken out:
/// labels, annotations and label selectors (the chart selects on app.kubernetes.io/name and
/// /instance, the base on app), namespaces, and an image pull policy of IfNotPresent, which is
/// the default the base leaves implicit.
fn in_substance(o: &serde_json::Value) -> serde_json::Value {
    match o {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.iter()
                .filter(|(k, v)| {
                    let dropped = matches!(
                        k.as_str(),
                        "labels" | "annotations" | "matchLabels" | "namespace"
                    ) || (k.as_str() == "selector" && v.get("matchLabels").is_none())
                        || (k.as_str() == "imagePullPolicy" && *v == "IfNotPresent");
                    !dropped
                })
                .map(|(k, v)| (k.clone(), in_substance(v)))
                .collect(),
        ),
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.iter().map(in_substance).collect())
        }
        v => v.clone(),
    }
}

fn by_kind_and_name(
    objects: &[serde_json::Value],
) -> std::collections::BTreeMap<String, serde_json::Value> {
    objects
        .iter()
        .map(|o| {
            (
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                ),
                in_substance(o),
            )
        })
        .collect()
}

/// With its default values the chart renders deploy/base's objects, but the Namespace (Helm's
/// `--create-namespace` makes it; its Pod Security label is the operator's to set).
#[test]
fn the_chart_with_default_values_renders_deploy_base() {
    let _module = common::module(module_path!());
    let home = tempfile::tempdir().unwrap();
    let chart = by_kind_and_name(&objects(&helm_template(home.path(), &[])));
    let mut base = by_kind_and_name(&objects(&render()));
    base.remove("Namespace/clusterset-dns")
        .expect("the base has its Namespace");
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        base.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    for (key, want) in &base {
        assert_eq!(
            &chart[key], want,
            "{key}: the chart differs from deploy/base"
        );
    }
}

/// With `source.read={linkerd}` the chart renders deploy/linkerd's objects, but the Namespace.
#[test]
fn the_chart_reading_linkerd_renders_deploy_linkerd() {
    let _module = common::module(module_path!());
    let home = tempfile::tempdir().unwrap();
    let chart = by_kind_and_name(&objects(&helm_template(
        home.path(),
        &["source.read={linkerd}"],
    )));
    let mut linkerd = by_kind_and_name(&objects(&render_dir("deploy/linkerd")));
    linkerd.remove("Namespace/clusterset-dns").unwrap();
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        linkerd.keys().collect::<Vec<_>>()
    );
    for (key, want) in &linkerd {
        assert_eq!(
            &chart[key], want,
            "{key}: the chart differs from deploy/linkerd"
        );
    }
}

/// With `linkerdBridge.enabled=true` the chart adds deploy/linkerd-bridge's objects (but the
/// Namespace) to deploy/base's, and the bridge's container takes its flags.
#[test]
fn the_chart_with_the_bridge_adds_deploy_linkerd_bridge() {
    let _module = common::module(module_path!());
    let home = tempfile::tempdir().unwrap();
    let rendered = helm_template(home.path(), &["linkerdBridge.enabled=true"]);
    validate(&rendered);
    let chart = by_kind_and_name(&objects(&rendered));
    let mut want = by_kind_and_name(&objects(&render()));
    want.extend(by_kind_and_name(&objects(&render_dir(
        "deploy/linkerd-bridge",
    ))));
    want.remove("Namespace/clusterset-dns").unwrap();
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (key, want) in &want {
        assert_eq!(
            &chart[key], want,
            "{key}: the chart differs from deploy/base and deploy/linkerd-bridge"
        );
    }
    let bridge = |set: &[&str]| {
        let o = objects(&helm_template(home.path(), set));
        o.into_iter()
            .find(|o| {
                o["kind"] == "Deployment"
                    && o["metadata"]["name"] == "clusterset-dns-linkerd-bridge"
            })
            .map(|d| d["spec"]["template"]["spec"]["containers"][0].clone())
    };
    let c = bridge(&[
        "linkerdBridge.enabled=true",
        "linkerdBridge.export.defaultMode=gateway",
        "linkerdBridge.leaseDuration=30s",
        "linkerdBridge.extraArgs={--resync=5m}",
        "linkerdBridge.import.routeOutsideMesh=false",
    ])
    .unwrap();
    flags_exist(&c);
    let args = c["args"].to_string();
    for a in [
        "--default-mode=gateway",
        "--lease-duration=30s",
        "--resync=5m",
        "--route-outside-mesh=false",
    ] {
        assert!(args.contains(a), "{a}: {args}");
    }
    // Not routing outside the mesh, the import half writes no Service: it reads them, and
    // deletes those it wrote while it routed.
    let import_services = |set: &[&str]| {
        let o = objects(&helm_template(home.path(), set));
        let role = (o.iter())
            .find(|o| o["metadata"]["name"] == "clusterset-dns-linkerd-bridge-import")
            .map(|r| r["rules"][0].clone())
            .unwrap();
        assert_eq!(role["resources"], serde_json::json!(["services"]));
        role["verbs"].clone()
    };
    assert_eq!(
        import_services(&[
            "linkerdBridge.enabled=true",
            "linkerdBridge.import.routeOutsideMesh=false"
        ]),
        serde_json::json!(["get", "list", "watch", "delete"])
    );
    // Routing outside the mesh (the default, compared with deploy/linkerd-bridge above).
    assert_eq!(
        import_services(&["linkerdBridge.enabled=true"]),
        serde_json::json!(["get", "list", "watch", "create", "patch", "delete"])
    );
    // One half alone: its flag, and only its role.
    for (half, other) in [("export", "import"), ("import", "export")] {
        let set = [
            "linkerdBridge.enabled=true".to_string(),
            format!("linkerdBridge.{other}.enabled=false"),
        ];
        let set: Vec<&str> = set.iter().map(String::as_str).collect();
        let c = bridge(&set).unwrap();
        assert!(
            c["args"]
                .to_string()
                .contains(&format!("\"--halves={half}\"")),
            "{c}"
        );
        let roles: Vec<String> = objects(&helm_template(home.path(), &set))
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert!(
            roles.contains(&format!("clusterset-dns-linkerd-bridge-{half}"))
                && !roles.contains(&format!("clusterset-dns-linkerd-bridge-{other}")),
            "{roles:?}"
        );
    }
    let c = bridge(&[
        "linkerdBridge.enabled=true",
        "clusterId=north",
        "source.linkerd.clusterIds.west=west.eu",
    ])
    .unwrap();
    let args = c["args"].to_string();
    assert!(
        args.contains("--cluster-id=north") && args.contains("--linkerd-cluster-id=west=west.eu"),
        "{args}"
    );
    assert!(
        bridge(&[
            "linkerdBridge.enabled=true",
            "linkerdBridge.export.enabled=false",
            "linkerdBridge.import.enabled=false"
        ])
        .is_none()
    );
}

/// Every combination of values in the table renders objects that validate strictly, whose
/// flags the binary takes, and that say what the values asked for.
#[test]
fn every_values_combination_validates() {
    let _module = common::module(module_path!());
    let home = tempfile::tempdir().unwrap();
    /// What a combination is, its `--set` values, and what its objects must say.
    type Check = dyn Fn(&[serde_json::Value]) -> Result<(), String>;
    let table: &[(&str, &[&str], &Check)] = &[
        ("defaults", &[], &|_| Ok(())),
        ("xdp", &["xdp.enabled=true", "xdp.coalesce=100us"], &|o| {
            let c = container(o);
            let args = c["args"].to_string();
            let caps = c["securityContext"]["capabilities"]["add"].to_string();
            (args.contains("--xdp=eth0")
                && args.contains("--xdp-coalesce=100us")
                && caps.contains("BPF")
                && c["resources"]["limits"]["memory"] == "192Mi"
                && c["resources"]["requests"]["memory"] == "64Mi")
                .then_some(())
                .ok_or(format!("{c}"))
        }),
        (
            "zones, TTL, source and hardening",
            &[
                "zones={clusterset.local,mcs.example}",
                "ttl=30",
                "nsAddresses={198.19.0.53}",
                "source.kubernetes.namespaces={shop,data}",
                "source.kubernetes.serviceImportVersion=v1alpha1",
                "source.kubernetes.excludeNamespaces={kube-system}",
                "hardening.denyCidrs={198.18.0.0/24}",
                "hardening.allowCidrs={198.18.0.0/15,fd00::/8}",
                "hardening.maxEndpointsPerService=100",
                "hardening.maxZoneNames=0",
                "hardening.tcpMaxConnections=64",
                "hardening.tcpIdleTimeout=5s",
                "hardening.allowTransfer={198.18.0.9}",
                "logLevel=debug",
                "logQueries=true",
                "extraArgs={--udp-workers=2}",
            ],
            &|o| {
                let args = container(o)["args"].to_string();
                [
                    "--zone=clusterset.local,mcs.example",
                    "--ttl=30",
                    "--namespace=shop,data",
                    "--serviceimport-version=v1alpha1",
                    "--exclude-namespace=kube-system",
                    "--max-zone-names=0",
                    "--tcp-max-connections=64",
                    "--allow-transfer=198.18.0.9",
                    "--udp-workers=2",
                ]
                .iter()
                .all(|a| args.contains(a))
                .then_some(())
                .ok_or(args)
            },
        ),
        (
            "both sources, Linkerd's flags",
            &[
                "source.read={mcs,linkerd}",
                "source.linkerd.clusterIds.east=east.prod",
                "source.linkerd.mirrors=true",
            ],
            &|o| {
                let args = container(o)["args"].to_string();
                let role = o.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
                (args.contains("--source=mcs,linkerd")
                    && args.contains("--linkerd-cluster-id=east=east.prod")
                    && args.contains("--linkerd-mirrors")
                    && role["rules"].to_string().contains("services"))
                .then_some(())
                .ok_or(format!("{args} {role}"))
            },
        ),
        (
            "Linkerd's Services only: no reading of the MCS API's objects",
            &["source.read={linkerd}"],
            &|o| {
                let role = o.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
                let rules = role["rules"].to_string();
                (rules.contains("services") && !rules.contains("serviceimports"))
                    .then_some(())
                    .ok_or(rules)
            },
        ),
        (
            "the own cluster id set: the flag, and no reading of ClusterProperties",
            &["clusterId=West"],
            &|o| {
                let args = container(o)["args"].to_string();
                let role = o.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
                (args.contains("\"--cluster-id=West\"")
                    && !role["rules"].to_string().contains("clusterproperties"))
                .then_some(())
                .ok_or(format!("{args} {role}"))
            },
        ),
        (
            "a HorizontalPodAutoscaler on CPU by default, the replicas left to it",
            &["hpa.enabled=true", "hpa.maxReplicas=4"],
            &|o| {
                let hpa = o.iter().find(|x| x["kind"] == "HorizontalPodAutoscaler");
                let deployment = o.iter().find(|x| x["kind"] == "Deployment").unwrap();
                let ok = hpa.is_some_and(|h| {
                    h["apiVersion"] == "autoscaling/v2"
                        && h["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
                        && h["spec"]["minReplicas"] == 2
                        && h["spec"]["maxReplicas"] == 4
                        && h["spec"]["metrics"][0]["resource"]["name"] == "cpu"
                        && h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80
                }) && deployment["spec"].get("replicas").is_none();
                ok.then_some(())
                    .ok_or(format!("{hpa:?}\n{}", deployment["spec"]))
            },
        ),
        (
            "a HorizontalPodAutoscaler with its own metrics and behaviour",
            &[
                "hpa.enabled=true",
                "hpa.metrics[0].type=Resource",
                "hpa.metrics[0].resource.name=memory",
                "hpa.metrics[0].resource.target.type=Utilization",
                "hpa.metrics[0].resource.target.averageUtilization=70",
                "hpa.behavior.scaleDown.stabilizationWindowSeconds=30",
            ],
            &|o| {
                let hpa = o
                    .iter()
                    .find(|x| x["kind"] == "HorizontalPodAutoscaler")
                    .unwrap();
                let metrics = hpa["spec"]["metrics"].as_array().unwrap();
                (metrics.len() == 1
                    && metrics[0]["resource"]["name"] == "memory"
                    && hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 30)
                    .then_some(())
                    .ok_or(format!("{hpa}"))
            },
        ),
        (
            "every namespace served",
            &["source.kubernetes.excludeNamespaces={}"],
            &|o| {
                let args = container(o)["args"].to_string();
                args.contains("\"--exclude-namespace=\"")
                    .then_some(())
                    .ok_or(args)
            },
        ),
        (
            "metrics Service, fixed address, NodePort, more replicas",
            &[
                "prometheus.service.enabled=true",
                "service.clusterIP=198.19.0.53",
                "serviceType=NodePort",
                "replicaCount=3",
            ],
            &|o| {
                let kinds = o.iter().filter(|x| x["kind"] == "Service").count();
                let svc = o
                    .iter()
                    .find(|x| x["kind"] == "Service" && x["spec"]["clusterIP"] == "198.19.0.53");
                (kinds == 2 && svc.is_some_and(|s| s["spec"]["type"] == "NodePort"))
                    .then_some(())
                    .ok_or(format!("{kinds} Services"))
            },
        ),
        (
            "no RBAC, an existing service account, no disruption budget",
            &[
                "rbac.create=false",
                "serviceAccount.create=false",
                "serviceAccount.name=dns-reader",
                "podDisruptionBudget=null",
            ],
            &|o| {
                let kinds: Vec<&str> = o.iter().map(|x| x["kind"].as_str().unwrap()).collect();
                let sa = &o.iter().find(|x| x["kind"] == "Deployment").unwrap()["spec"]["template"]
                    ["spec"]["serviceAccountName"];
                (kinds == ["Service", "Deployment"] && sa == "dns-reader")
                    .then_some(())
                    .ok_or(format!("{kinds:?}, {sa}"))
            },
        ),
        (
            "scheduling",
            &[
                "priorityClassName=",
                "tolerations[0].key=dedicated",
                "tolerations[0].operator=Exists",
                "nodeSelector.kubernetes\\.io/os=linux",
                "topologySpreadConstraints[0].maxSkew=2",
                "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
                "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/arch",
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=In",
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values={amd64}",
                "podDisruptionBudget.minAvailable=null",
                "podDisruptionBudget.maxUnavailable=1",
            ],
            &|o| {
                let spec = &o.iter().find(|x| x["kind"] == "Deployment").unwrap()["spec"]["template"]
                    ["spec"];
                let pdb = o
                    .iter()
                    .find(|x| x["kind"] == "PodDisruptionBudget")
                    .unwrap();
                (spec.get("priorityClassName").is_none()
                    && spec["affinity"].get("podAntiAffinity").is_none()
                    && spec["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "clusterset-dns"
                    && pdb["spec"].get("minAvailable").is_none()
                    && pdb["spec"]["maxUnavailable"] == 1)
                    .then_some(())
                    .ok_or(format!("{spec}\n{pdb}"))
            },
        ),
        (
            "the MCS status kit for kube-state-metrics, at v1alpha1, bound to its account",
            &[
                "monitoring.mcsState.enabled=true",
                "monitoring.mcsState.version=v1alpha1",
                "monitoring.mcsState.namespace=monitoring",
                "monitoring.mcsState.serviceAccount.name=kube-state-metrics",
                "monitoring.mcsState.rules.additionalLabels.release=kps",
            ],
            &|o| {
                let of = |kind: &str, name: &str| {
                    o.iter()
                        .find(|x| x["kind"] == kind && x["metadata"]["name"] == name)
                        .ok_or(format!("no {kind} {name}"))
                };
                let config = of("ConfigMap", "clusterset-dns-mcs-state")?;
                let file = std::fs::read_to_string(
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("deploy/monitoring/mcs/kube-state-metrics.yaml"),
                )
                .unwrap();
                let want = file.replace("version: \"*\",", "version: v1alpha1,");
                let role = of("ClusterRole", "clusterset-dns-mcs-state")?;
                let binding = of("ClusterRoleBinding", "clusterset-dns-mcs-state")?;
                let rule = of("PrometheusRule", "clusterset-dns-mcs-state")?;
                let board = of("ConfigMap", "clusterset-dns-mcs-state-dashboard")?;
                let ok = config["data"]["config.yaml"] == want.as_str()
                    && want.matches("version: v1alpha1,").count() == 2
                    && config["metadata"]["namespace"] == "monitoring"
                    && crate::deploy::role_grants(role)
                        == [
                            "apiextensions.k8s.io/customresourcedefinitions list,watch",
                            "multicluster.x-k8s.io/serviceexports list,watch",
                            "multicluster.x-k8s.io/serviceimports list,watch",
                        ]
                    && binding["subjects"][0]["name"] == "kube-state-metrics"
                    && binding["subjects"][0]["namespace"] == "monitoring"
                    && rule["metadata"]["labels"]["release"] == "kps"
                    && rule["spec"]["groups"][0]["rules"].as_array().map(Vec::len) == Some(4)
                    && board["metadata"]["labels"]["grafana_dashboard"] == "1"
                    && serde_json::from_str::<serde_json::Value>(
                        board["data"]["multicluster-services.json"]
                            .as_str()
                            .unwrap_or(""),
                    )
                    .is_ok_and(|d| d["uid"] == "multicluster-services");
                ok.then_some(())
                    .ok_or(format!("{config}\n{binding}\n{rule}"))
            },
        ),
    ];
    for (what, set, check) in table {
        let rendered = helm_template(home.path(), set);
        let objects = objects(&rendered);
        validate(&rendered);
        flags_exist(container(&objects));
        check(&objects).unwrap_or_else(|e| panic!("{what}: {e}"));
        if objects.iter().any(|o| o["kind"] == "ClusterRole") {
            assert_eq!(grants(&objects), read_by_flags(&objects), "{what}");
        }
    }
    // A version the MCS CRDs do not have is refused, by name.
    let out = common::helm(home.path())
        .args(["template", "clusterset-dns", CHART])
        .args(["--set", "monitoring.mcsState.enabled=true"])
        .args(["--set", "monitoring.mcsState.version=v1"])
        .output()
        .unwrap();
    let said = common::output_text(&out);
    assert!(
        !out.status.success()
            && said
                .contains("monitoring.mcsState.version: \"v1\" is not a version of the MCS CRDs"),
        "{said}"
    );
}

/// The chart pins the Service where deploy/address does, and its notes give each forward with
/// that address; `service.clusterIP=None` (a headless Service, which no cluster DNS can forward
/// to) is refused by name, and `""` leaves the choice to the API server with a warning.
#[test]
fn the_chart_pins_the_address_its_notes_forward_to() {
    let _module = common::module(module_path!());
    let home = tempfile::tempdir().unwrap();
    let service_ip = |set: &[&str]| {
        objects(&helm_template(home.path(), set))
            .into_iter()
            .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "clusterset-dns")
            .unwrap()["spec"]["clusterIP"]
            .clone()
    };
    assert_eq!(service_ip(&[]), common::SHIPPED_ADDRESS);
    assert_eq!(
        service_ip(&["service.clusterIP=198.19.0.53"]),
        "198.19.0.53"
    );
    assert_eq!(service_ip(&["service.clusterIP="]), serde_json::Value::Null);
    let out = common::helm(home.path())
        .args([
            "template",
            "clusterset-dns",
            CHART,
            "--set",
            "service.clusterIP=None",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        common::output_text(&out)
            .contains("service.clusterIP: None would make the Service headless"),
        "{}",
        common::output_text(&out)
    );
    // The notes, as `helm install` prints them.
    let notes = |set: &[&str]| {
        let mut c = common::helm(home.path());
        c.args([
            "install",
            "clusterset-dns",
            CHART,
            "--namespace",
            "clusterset-dns",
            "--dry-run=client",
        ]);
        for s in set {
            c.args(["--set", s]);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", common::output_text(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        text[text.find("NOTES:").expect("helm prints the notes")..].to_string()
    };
    let pinned = notes(&["service.clusterIP=198.19.0.53"]);
    assert!(pinned.contains("forward . 198.19.0.53\n"), "{pinned}");
    assert!(
        pinned.contains(r#"{"clusterset.local": ["198.19.0.53"]}"#),
        "{pinned}"
    );
    assert!(!pinned.contains(common::SHIPPED_ADDRESS), "{pinned}");
    let unpinned = notes(&["service.clusterIP="]);
    assert!(
        unpinned.contains("service.clusterIP is empty"),
        "{unpinned}"
    );
    assert!(!unpinned.contains("forward . "), "{unpinned}");
}
