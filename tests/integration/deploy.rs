//! deploy/: the kustomize base and its flavours render with `kubectl kustomize`, validate
//! strictly with `kubernetes-validate` (pip), grant read access to exactly what the server
//! watches, and pass only flags the binary has; the Dockerfile builds from what it copies. The
//! Helm chart's tests are `chart.rs`, with the checks here.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{kustomize as render_dir, yaml_objects as objects};

pub(crate) fn render() -> String {
    render_dir("deploy/base")
}

pub(crate) fn validate(rendered: &str) {
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
    let bridge = render_dir("deploy/linkerd-bridge");
    validate(&bridge);
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
pub(crate) fn grants(objects: &[serde_json::Value]) -> Vec<String> {
    // The server's role: the one not made for kube-state-metrics (the chart's
    // monitoring.mcsState), which grants what kube-state-metrics reads, not the server.
    let role = objects
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole"
                && o["metadata"]["labels"]["app.kubernetes.io/component"] != "mcs-state"
        })
        .unwrap();
    role_grants(role)
}

/// `group/resource verbs` of each grant of `role`, sorted.
pub(crate) fn role_grants(role: &serde_json::Value) -> Vec<String> {
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
pub(crate) fn read_by_flags(objects: &[serde_json::Value]) -> Vec<String> {
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
    // Two kinds may read one resource (the MCS API's EndpointSlices and this cluster's own).
    read.dedup();
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
pub(crate) fn flags_exist(container: &serde_json::Value) {
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
    // A subcommand's (the first argument, when it is not a flag) flags are in its own --help.
    let subcommand: Vec<&str> = args
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .copied()
        .collect();
    let help = String::from_utf8(
        Command::new(common::BIN)
            .args(&subcommand)
            .arg("--help")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for a in &args[subcommand.len()..] {
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
    // The shipped address (kubeadm's range) is refused here, by name, with the range it must be
    // in: nothing half-applied forwards anywhere. With deploy/address set inside the cluster's
    // range, as its header says, the Service takes it.
    let service = |rendered: &str| {
        let mut svc = objects(rendered)
            .into_iter()
            .find(|o| o["kind"] == "Service")
            .unwrap();
        // In a namespace that exists before the base's is made.
        svc["metadata"]["namespace"] = "default".into();
        serde_json::to_string(&svc).unwrap()
    };
    let refused = k
        .kubectl_input(
            &["create", "--dry-run=server", "-f", "-"],
            &service(&render()),
        )
        .expect_err("the shipped address outside the cluster's Service range");
    assert!(
        refused.contains("10.96.0.53") && refused.contains("198.19.224.0/19"),
        "{refused}"
    );
    let ours = "198.19.224.53";
    let (base, xdp) = (
        common::kustomize_at("deploy/base", ours),
        common::kustomize_at("deploy/xdp", ours),
    );
    k.apply(&base);
    assert_eq!(
        k.kubectl_out(&[
            "-n",
            "clusterset-dns",
            "get",
            "service",
            "clusterset-dns",
            "-o",
            "jsonpath={.spec.clusterIP}"
        ]),
        ours
    );
    pod_dry_run(&base).expect("the base pod under restricted");
    let refused = pod_dry_run(&xdp).expect_err("the XDP pod admitted under restricted");
    assert!(
        refused.contains("PodSecurity") && refused.contains("restricted"),
        "{refused}"
    );
    k.apply(&xdp);
    pod_dry_run(&xdp).expect("the XDP pod under its own namespace's level");
}

/// The ConfigMap `name` in kube-system that `rendered` holds (its only object), and its data.
fn forwarding_configmap(rendered: &str, name: &str) -> serde_json::Value {
    validate(rendered);
    let objs = objects(rendered);
    assert_eq!(objs.len(), 1, "one object:\n{rendered}");
    let cm = &objs[0];
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], name);
    assert_eq!(cm["metadata"]["namespace"], "kube-system");
    cm["data"].clone()
}

/// Where each forwarding recipe sends clusterset.local, and the Service's ClusterIP, as
/// rendered from a deploy/ whose one address is `address`.
fn addresses_rendered(address: &str) -> Vec<(&'static str, String)> {
    let at = |dir| common::kustomize_at(dir, address);
    let forward_of = |corefile: &str| -> String {
        // The clusterset.local block's forward line, quotes and all.
        let block: Vec<&str> = corefile
            .lines()
            .skip_while(|l| !l.starts_with("clusterset.local:53 {"))
            .take_while(|l| *l != "}")
            .collect();
        let line = block
            .iter()
            .find_map(|l| l.trim().strip_prefix("forward . "))
            .unwrap_or_else(|| panic!("no forward in the clusterset.local block:\n{corefile}"));
        line.strip_prefix('"')
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or_else(|| panic!("the address is not quoted: {line}"))
            .to_string()
    };
    let service = objects(&at("deploy/base"))
        .into_iter()
        .find(|o| o["kind"] == "Service")
        .unwrap();
    let coredns = forwarding_configmap(&at("deploy/forwarding/coredns"), "coredns");
    let aks = forwarding_configmap(&at("deploy/forwarding/aks"), "coredns-custom");
    let stub = |dir| {
        let data = forwarding_configmap(&at(dir), "kube-dns");
        let stub: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(data["stubDomains"].as_str().unwrap())
                .expect("stubDomains is JSON, as kube-dns and node-cache parse it");
        assert_eq!(stub.len(), 1, "{stub:?}");
        assert_eq!(stub["clusterset.local"].len(), 1, "{stub:?}");
        stub["clusterset.local"][0].clone()
    };
    vec![
        (
            "Service",
            service["spec"]["clusterIP"].as_str().unwrap().to_string(),
        ),
        ("coredns", forward_of(coredns["Corefile"].as_str().unwrap())),
        (
            "aks",
            forward_of(aks["clusterset.server"].as_str().unwrap()),
        ),
        ("kube-dns", stub("deploy/forwarding/kube-dns")),
        ("node-local-dns", stub("deploy/forwarding/node-local-dns")),
    ]
}

/// The Service's ClusterIP and every forward come from deploy/address: as shipped, and after
/// the one line an operator changes there. Nothing rendered keeps a placeholder or the shipped
/// address once another is set.
#[test]
fn every_forward_names_the_pinned_address_set_in_one_place() {
    let _module = common::module(module_path!());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The CoreDNS recipe is exactly Corefile.example; the AKS block is its clusterset.local one.
    let example = std::fs::read_to_string(repo.join("Corefile.example")).unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.join("deploy/forwarding/coredns/Corefile")).unwrap(),
        example
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("deploy/forwarding/aks/clusterset.server")).unwrap(),
        common::coredns::clusterset_block()
    );
    // The replacements find the address between the only two double quotes.
    assert_eq!(example.matches('"').count(), 2, "{example}");
    for (address, other) in [
        (common::SHIPPED_ADDRESS, None),
        ("198.19.7.53", Some(common::SHIPPED_ADDRESS)),
    ] {
        let rendered = addresses_rendered(address);
        for (what, got) in &rendered {
            assert_eq!(got, address, "{what} with deploy/address at {address}");
        }
        for dir in [
            "deploy/base",
            "deploy/forwarding/coredns",
            "deploy/forwarding/aks",
            "deploy/forwarding/kube-dns",
            "deploy/forwarding/node-local-dns",
        ] {
            let text = common::kustomize_at(dir, address);
            assert!(!text.contains("__PILLAR__"), "{dir}:\n{text}");
            assert!(
                !text.contains("clusterset-dns-address"),
                "{dir} applies the address source:\n{text}"
            );
            if let Some(other) = other {
                let live: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with('#'))
                    .collect();
                assert!(
                    !live.iter().any(|l| l.contains(other)),
                    "{dir} still names {other}:\n{text}"
                );
            }
        }
    }
    // The node-local-dns directory is the kube-dns stub domain, nothing else: no node-local-dns
    // Corefile is edited.
    assert_eq!(
        common::kustomize("deploy/forwarding/node-local-dns"),
        common::kustomize("deploy/forwarding/kube-dns")
    );
    // kube-dns's ConfigMap keeps the addon manager's EnsureExists label: it creates the
    // ConfigMap empty and never resets it.
    let kube_dns = objects(&common::kustomize("deploy/forwarding/kube-dns"));
    assert_eq!(
        kube_dns[0]["metadata"]["labels"]["addonmanager.kubernetes.io/mode"],
        "EnsureExists"
    );
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
            common::copy_dir(&root.join(s), &to);
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

/// The server's container in rendered objects.
pub(crate) fn container(objects: &[serde_json::Value]) -> &serde_json::Value {
    &objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment")["spec"]["template"]["spec"]["containers"][0]
}

/// deploy/linkerd-bridge's roles are exactly what each half does, spelled out: the export
/// half reads ServiceExports and patches their status, reads and patches Services, and writes
/// Events; the import
/// half reads Services and creates, patches and deletes its own (the ports a federated Service
/// lacks), reads Links, applies (creating) and deletes ServiceImports and patches their
/// status, creates, patches and deletes EndpointSlices, and writes Events; both hold a Lease in
/// their own namespace. (linkerd_bridge*.rs run each half as these roles: a grant too few fails
/// there, one too many fails here.) The chart renders the same objects (chart.rs).
#[test]
fn the_bridges_roles_are_exactly_what_each_half_does() {
    let _module = common::module(module_path!());
    let o = objects(&render_dir("deploy/linkerd-bridge"));
    let role = |kind: &str, name: &str| {
        let r = o
            .iter()
            .find(|r| r["kind"] == kind && r["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"));
        role_grants(r)
    };
    assert_eq!(
        role("ClusterRole", "clusterset-dns-linkerd-bridge-export"),
        [
            "/services get,list,patch,watch",
            "events.k8s.io/events create,patch",
            "multicluster.x-k8s.io/serviceexports get,list,watch",
            "multicluster.x-k8s.io/serviceexports/status patch",
        ]
    );
    assert_eq!(
        role("ClusterRole", "clusterset-dns-linkerd-bridge-import"),
        [
            "/services create,delete,get,list,patch,watch",
            "discovery.k8s.io/endpointslices create,delete,get,list,patch,watch",
            "events.k8s.io/events create,patch",
            "multicluster.x-k8s.io/serviceimports create,delete,get,list,patch,watch",
            "multicluster.x-k8s.io/serviceimports/status patch",
        ]
    );
    assert_eq!(
        role("ClusterRole", "clusterset-dns-linkerd-bridge-clusters"),
        [
            "about.k8s.io/clusterproperties get",
            "multicluster.linkerd.io/links get,list,watch",
        ]
    );
    assert_eq!(
        role("Role", "clusterset-dns-linkerd-bridge-credentials"),
        ["/secrets get"]
    );
    let credentials = o
        .iter()
        .filter(|r| r["metadata"]["name"] == "clusterset-dns-linkerd-bridge-credentials")
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(
        credentials,
        ["linkerd-multicluster", "linkerd-multicluster"],
        "the Secrets it may get are the Links' only"
    );
    assert_eq!(
        role("Role", "clusterset-dns-linkerd-bridge-lease"),
        ["coordination.k8s.io/leases create,get,update"]
    );
    let kinds: Vec<&str> = o
        .iter()
        .filter(|r| r["kind"].as_str().unwrap().contains("Role"))
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Role",
            "Role",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "RoleBinding",
            "RoleBinding",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ClusterRoleBinding"
        ],
        "no other role or binding"
    );
}
