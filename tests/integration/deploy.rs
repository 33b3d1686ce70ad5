//! deploy/: the kustomize base renders with `kubectl kustomize`, validates strictly with
//! `kubernetes-validate` (pip), grants read access to exactly what the server watches, and
//! passes only flags the binary has. The Helm chart (deploy/helm) lints, renders the base's
//! objects with its default values, and every combination of a table of values validates, takes
//! only real flags and says what was asked.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{kustomize as render_dir, yaml_objects as objects};

fn render() -> String {
    render_dir("deploy/base")
}

fn validate(rendered: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, rendered).unwrap();
    common::run_ok(
        Command::new("kubernetes-validate")
            .args(["--strict", "--quiet"])
            .arg(&file),
    );
}

#[test]
fn manifests_render_and_validate() {
    let _module = common::module(module_path!());
    for dir in ["deploy/base", "deploy/xdp", "deploy/linkerd"] {
        let rendered = render_dir(dir);
        validate(&rendered);
        let kinds: Vec<String> = objects(&rendered)
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect();
        for kind in [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
        ] {
            assert!(
                kinds.iter().any(|k| k == kind),
                "{kind} missing from {dir}: {kinds:?}"
            );
        }
    }
}

/// `group/resource verbs` of each grant of the ClusterRole in `objects`, sorted.
fn grants(objects: &[serde_json::Value]) -> Vec<String> {
    let role = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    let mut grants: Vec<String> = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                let mut verbs: Vec<&str> = rule["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                verbs.sort();
                grants.push(format!(
                    "{}/{} {}",
                    g.as_str().unwrap(),
                    r.as_str().unwrap(),
                    verbs.join(",")
                ));
            }
        }
    }
    grants.sort();
    grants
}

/// What the server reads when started with the rendered container's flags: the resource of
/// each kind `source::kinds` lists for the selection those flags make, read-only, sorted.
fn read_by_flags(objects: &[serde_json::Value]) -> Vec<String> {
    use clap::Parser;
    let args: Vec<String> = container(objects)["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    let parsed = clusterset_dns::cli::Args::try_parse_from(
        std::iter::once("clusterset-dns".to_string()).chain(args.iter().cloned()),
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let config = parsed.config().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut read: Vec<String> = clusterset_dns::source::kinds(&config.source.selection, None)
        .iter()
        .map(|k| {
            let r = k.resource();
            format!("{}/{} get,list,watch", r.group, r.plural)
        })
        .collect();
    read.sort();
    read
}

/// Each flavour's ClusterRole grants exactly what its own flags make the server read (the list
/// of kinds is the one truth: a kind added without its RBAC, or RBAC left behind, fails here).
#[test]
fn every_flavours_role_grants_exactly_what_its_flags_read() {
    let _module = common::module(module_path!());
    for dir in ["deploy/base", "deploy/xdp", "deploy/linkerd"] {
        let o = objects(&render_dir(dir));
        assert_eq!(grants(&o), read_by_flags(&o), "{dir}");
    }
    // deploy/base, spelled out once, so that the check above is seen to compare something.
    assert_eq!(
        grants(&objects(&render())),
        [
            "about.k8s.io/clusterproperties get,list,watch",
            "discovery.k8s.io/endpointslices get,list,watch",
            "multicluster.x-k8s.io/serviceimports get,list,watch"
        ]
    );
}

#[test]
fn the_deployment_is_hardened_and_passes_only_real_flags() {
    let _module = common::module(module_path!());
    let objs = objects(&render());
    let dep = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let spec = &dep["spec"]["template"]["spec"];
    assert_eq!(dep["spec"]["replicas"], 2);
    assert!(spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let c = &spec["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/health");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready");
    assert!(
        c["resources"]["requests"]["memory"].is_string()
            && c["resources"]["requests"]["cpu"].is_string()
    );
    flags_exist(c);
    // A rollout drops nothing: the readiness probe sees the lame duck's 503 well within it,
    // and the pod is given the lame duck and the drain before it is killed.
    let flag = |name: &str| -> u64 {
        let arg = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str()?.strip_prefix(&format!("--{name}=")))
            .next()
            .unwrap_or_else(|| panic!("the Deployment sets --{name}"));
        arg.strip_suffix('s').unwrap().parse().unwrap()
    };
    let (lameduck, grace) = (flag("lameduck"), flag("shutdown-grace"));
    let probe = &c["readinessProbe"];
    let noticed =
        probe["periodSeconds"].as_u64().unwrap() * probe["failureThreshold"].as_u64().unwrap();
    assert!(
        noticed < lameduck,
        "readiness notices the lame duck after {noticed} s of {lameduck}"
    );
    let kill = spec["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        kill >= lameduck + grace,
        "killed after {kill} s, before lame duck {lameduck} + grace {grace}"
    );
    // The Service sends port 53 to the container's DNS ports.
    let svc = objs.iter().find(|o| o["kind"] == "Service").unwrap();
    let ports: Vec<String> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}/{}->{}",
                p["port"],
                p["protocol"].as_str().unwrap(),
                p["targetPort"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        ports.contains(&"53/UDP->dns".to_string())
            && ports.contains(&"53/TCP->dns-tcp".to_string()),
        "{ports:?}"
    );
}

/// The container's flags exist: the binary accepts them all (with --version, it parses and
/// exits), and --help lists each.
fn flags_exist(container: &serde_json::Value) {
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let out = Command::new(common::BIN)
        .args(&args)
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the binary rejects the manifest's flags {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let help = String::from_utf8(
        Command::new(common::BIN)
            .arg("--help")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for a in &args {
        let flag = a.split('=').next().unwrap();
        assert!(help.contains(flag), "{flag} is not in --help");
    }
}

/// deploy/xdp is deploy/base with only what XDP needs changed: the namespace's Pod Security
/// level, the --xdp flag, the memory limit and the container's privileges. Anything else that
/// differs would be a second copy of the base drifting from it.
#[test]
fn the_xdp_flavour_changes_only_what_xdp_needs() {
    let _module = common::module(module_path!());
    let base = objects(&render());
    let mut xdp = objects(&render_dir("deploy/xdp"));
    assert_eq!(base.len(), xdp.len());
    let dep = xdp.iter().position(|o| o["kind"] == "Deployment").unwrap();
    let c = xdp[dep]["spec"]["template"]["spec"]["containers"][0].clone();
    flags_exist(&c);
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsUser"], 0);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    let mut add: Vec<&str> = sc["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    add.sort();
    assert_eq!(add, ["BPF", "IPC_LOCK", "NET_ADMIN", "NET_RAW"]);
    // Undo the four changes: what is left must be the base exactly.
    let cb = &base.iter().find(|o| o["kind"] == "Deployment").unwrap()["spec"]["template"]["spec"]
        ["containers"][0];
    let x = &mut xdp[dep]["spec"]["template"]["spec"]["containers"][0];
    let args = x["args"].as_array_mut().unwrap();
    assert_eq!(args.pop().unwrap(), "--xdp=eth0");
    x["securityContext"] = cb["securityContext"].clone();
    x["resources"]["limits"]["memory"] = cb["resources"]["limits"]["memory"].clone();
    let ns = xdp.iter().position(|o| o["kind"] == "Namespace").unwrap();
    let level = &mut xdp[ns]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"];
    assert_eq!(*level, "privileged");
    *level = "restricted".into();
    assert_eq!(xdp, base);
}

/// deploy/linkerd is deploy/base with the role reading Linkerd's Services instead of the MCS
/// API's objects (get, list, watch, nothing else) and --source=linkerd.
#[test]
fn the_linkerd_flavour_changes_only_what_it_reads_and_the_flag() {
    let _module = common::module(module_path!());
    let base = objects(&render());
    let mut linkerd = objects(&render_dir("deploy/linkerd"));
    assert_eq!(base.len(), linkerd.len());
    assert_eq!(
        grants(&linkerd),
        [
            "/services get,list,watch",
            "about.k8s.io/clusterproperties get,list,watch"
        ]
    );
    let role = linkerd
        .iter()
        .position(|o| o["kind"] == "ClusterRole")
        .unwrap();
    let base_role = base.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    linkerd[role]["rules"] = base_role["rules"].clone();
    let dep = linkerd
        .iter()
        .position(|o| o["kind"] == "Deployment")
        .unwrap();
    let c = &mut linkerd[dep]["spec"]["template"]["spec"]["containers"][0];
    flags_exist(c);
    let args = c["args"].as_array_mut().unwrap();
    assert_eq!(args.pop().unwrap(), "--source=linkerd");
    assert_eq!(linkerd, base);
}

/// A real API server admits each flavour's pod in the namespace it renders: deploy/base's under
/// Pod Security "restricted", deploy/xdp's (root, four capabilities) under "privileged"; and it
/// refuses the XDP pod under "restricted", so the check is one that can fail.
#[test]
fn the_api_server_admits_each_flavours_pod() {
    let _module = common::module(module_path!());
    let k = common::k8s::Cluster::start();
    let pod_dry_run = |rendered: &str| -> Result<(), String> {
        let objs = objects(rendered);
        let dep = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "clusterset-dns-probe",
                "namespace": dep["metadata"]["namespace"],
                "labels": dep["spec"]["template"]["metadata"]["labels"],
            },
            "spec": dep["spec"]["template"]["spec"],
        });
        k.kubectl_input(&["create", "--dry-run=server", "-f", "-"], &pod.to_string())
    };
    let (base, xdp) = (render(), render_dir("deploy/xdp"));
    k.apply(&base);
    pod_dry_run(&base).expect("the base pod under restricted");
    let refused = pod_dry_run(&xdp).expect_err("the XDP pod admitted under restricted");
    assert!(
        refused.contains("PodSecurity") && refused.contains("restricted"),
        "{refused}"
    );
    k.apply(&xdp);
    pod_dry_run(&xdp).expect("the XDP pod under its own namespace's level");
}

/// The ConfigMap `name` in kube-system that `dir` renders to, and its data.
fn forwarding_configmap(dir: &str, name: &str) -> serde_json::Value {
    let rendered = render_dir(dir);
    validate(&rendered);
    let objs = objects(&rendered);
    assert_eq!(objs.len(), 1, "{dir} renders one object");
    let cm = &objs[0];
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], name);
    assert_eq!(cm["metadata"]["namespace"], "kube-system");
    cm["data"].clone()
}

#[test]
fn forwarding_patches_carry_corefile_example() {
    let _module = common::module(module_path!());
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Corefile.example"))
            .unwrap();
    // CoreDNS: exactly Corefile.example.
    let data = forwarding_configmap("deploy/forwarding/coredns", "coredns");
    assert_eq!(data["Corefile"].as_str().unwrap(), example);
    // The other two point clusterset.local at the same address as Corefile.example.
    let upstream = example
        .lines()
        .skip_while(|l| !l.starts_with("clusterset.local:53 {"))
        .find_map(|l| l.trim().strip_prefix("forward . "))
        .expect("Corefile.example forwards clusterset.local")
        .trim_end_matches(":53")
        .to_string();
    let data = forwarding_configmap("deploy/forwarding/kube-dns", "kube-dns");
    let stub: serde_json::Value =
        serde_json::from_str(data["stubDomains"].as_str().unwrap()).unwrap();
    assert_eq!(stub, serde_json::json!({"clusterset.local": [upstream]}));
    let data = forwarding_configmap("deploy/forwarding/node-local-dns", "node-local-dns");
    let corefile = data["Corefile"].as_str().unwrap();
    let block: Vec<&str> = corefile
        .lines()
        .skip_while(|l| !l.starts_with("clusterset.local:53 {"))
        .take_while(|l| *l != "}")
        .collect();
    assert!(
        block.contains(&format!("    forward . {upstream}:53").as_str()),
        "{corefile}"
    );
    // node-local-dns keeps forwarding cluster.local to the cluster DNS.
    assert!(corefile.contains("cluster.local:53 {"));
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy_tree(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
}

/// No container engine runs on the development machine, so the image is checked through what its
/// build depends on. The build stage, given only the files its COPY lines bring, must be a
/// complete package with a current lockfile (`cargo metadata --locked --offline` fails on a stale
/// lock) whose every target file is present, and must build the binary the final stage copies
/// and runs. The final stage must be distroless, run as a non-root numeric user (the one the
/// Deployment asks for, if it names one) and expose exactly the Deployment's container ports.
#[test]
fn the_dockerfile_builds_from_what_it_copies_and_matches_the_deployment() {
    let _module = common::module(module_path!());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "two stages");
    let (build, run) = (&lines[froms[0]..froms[1]], &lines[froms[1]..]);
    assert!(build[0].ends_with(" AS build"), "{}", build[0]);

    // The build context as the build stage sees it (WORKDIR /src).
    let ctx = tempfile::tempdir().unwrap();
    for l in build.iter().filter(|l| l.starts_with("COPY ")) {
        let parts: Vec<&str> = l.split_whitespace().skip(1).collect();
        let (sources, dest) = parts.split_at(parts.len() - 1);
        for s in sources {
            let to = if dest[0].ends_with('/') {
                ctx.path().join(dest[0]).join(s)
            } else {
                ctx.path().join(dest[0])
            };
            assert!(root.join(s).exists(), "COPY {s}: not in the repository");
            copy_tree(&root.join(s), &to);
        }
    }
    let cargo = build
        .iter()
        .find(|l| l.starts_with("RUN cargo build"))
        .expect("a cargo build step");
    assert!(
        cargo.contains("--release") && cargo.contains("--locked"),
        "{cargo}"
    );
    let bin = cargo
        .split("--bin ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("--bin NAME");
    // Cargo drops targets whose files are absent, so compare what the binary needs (library,
    // binaries, build script) with the full checkout's package.
    let needed = |dir: &Path| -> Vec<(String, String)> {
        let out = Command::new("cargo")
            // --no-deps: only the package's own targets matter, and a new machine may not
            // have downloaded crates for other platforms that a full resolve would want.
            .args([
                "metadata",
                "--no-deps",
                "--offline",
                "--format-version",
                "1",
            ])
            .arg("--manifest-path")
            .arg(dir.join("Cargo.toml"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the build stage's files are not a complete package: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let package = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "clusterset-dns")
            .unwrap()
            .clone();
        let mut v: Vec<(String, String)> = package["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| ["lib", "bin", "custom-build"].contains(&t["kind"][0].as_str().unwrap()))
            .map(|t| {
                let path = Path::new(t["src_path"].as_str().unwrap());
                assert!(path.exists(), "{} is missing", path.display());
                (
                    t["kind"][0].as_str().unwrap().to_string(),
                    t["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let targets = needed(ctx.path());
    assert_eq!(
        targets,
        needed(root),
        "the build stage lacks files the package builds from"
    );
    assert!(
        targets.contains(&("bin".to_string(), bin.to_string())),
        "--bin {bin} is not a binary of the package"
    );

    // The final stage.
    assert!(
        run[0].contains("distroless") && run[0].contains("nonroot"),
        "{}",
        run[0]
    );
    let installed = format!("/usr/local/bin/{bin}");
    assert!(
        run.contains(&format!("COPY --from=build /src/target/release/{bin} {installed}").as_str())
    );
    assert!(run.contains(&format!("ENTRYPOINT [\"{installed}\"]").as_str()));
    let user = run
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("numeric user");
    assert_ne!(uid, 0, "non-root");

    let deployment = objects(&render())
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    for sc in [&pod["securityContext"], &container["securityContext"]] {
        if let Some(u) = sc["runAsUser"].as_u64() {
            assert_eq!(
                u, uid as u64,
                "the Deployment's runAsUser is the image's USER"
            );
        }
    }
    let mut exposed: Vec<String> = run
        .iter()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|l| l.split_whitespace().map(str::to_lowercase))
        .collect();
    let mut ports: Vec<String> = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["containerPort"],
                p["protocol"].as_str().unwrap_or("TCP").to_lowercase()
            )
        })
        .collect();
    exposed.sort();
    ports.sort();
    assert_eq!(exposed, ports);
}

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
    // The chart's copy of the alerts is deploy/monitoring's, word for word.
    assert_eq!(
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(CHART)
                .join("files/rules.yaml")
        )
        .unwrap(),
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/monitoring/rules.yaml")
        )
        .unwrap(),
        "files/rules.yaml is a copy of deploy/monitoring/rules.yaml"
    );
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
}

/// The server's container in rendered objects.
fn container(objects: &[serde_json::Value]) -> &serde_json::Value {
    &objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment")["spec"]["template"]["spec"]["containers"][0]
}
