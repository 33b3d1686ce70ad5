//! The container image: built from the repository's Dockerfile as it is, on a Docker engine of
//! the tests' own with the base images its FROM lines name made from Debian packages
//! (tests/image/setup.sh; no registry can be reached here), then run with deploy/base's
//! container security context and arguments and queried with dig over UDP and TCP. Needs root
//! (CI runs as root) for the engine.

use crate::common;
use crate::common::wait::{Lazy, until};

use std::process::Command;
use std::time::Duration;

use common::docker::{DOCKER, IMAGE, build_image, docker, engine, revision};
use common::{dig, free_udp_tcp_port, http_get_blocking, kustomize, yaml_objects};

/// Removes the container it names when dropped.
struct Container<'a> {
    host: &'a str,
    id: String,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = Command::new(DOCKER)
            .env("DOCKER_HOST", self.host)
            .args(["rm", "-f", &self.id])
            .output();
    }
}

#[test]
fn the_image_builds_from_the_dockerfile_and_serves_under_the_deployments_security_context() {
    let _module = common::module(module_path!());
    let host = engine();
    let revision = revision();
    let took = build_image(&host);
    let size: f64 = docker(&host, &["image", "inspect", "--format", "{{.Size}}", IMAGE])
        .parse()
        .unwrap();
    // The runtime stage is the distroless base and the binary: nothing of the build stage.
    let base: f64 = docker(
        &host,
        &[
            "image",
            "inspect",
            "--format",
            "{{.Size}}",
            "gcr.io/distroless/cc-debian12:nonroot",
        ],
    )
    .parse()
    .unwrap();
    let made = docker(&host, &["create", IMAGE]);
    let out = tempfile::tempdir().unwrap();
    let copied = out.path().join("clusterset-dns");
    docker(
        &host,
        &[
            "cp",
            &format!("{made}:/usr/local/bin/clusterset-dns"),
            copied.to_str().unwrap(),
        ],
    );
    docker(&host, &["rm", &made]);
    let binary = std::fs::metadata(&copied).unwrap().len() as f64;
    eprintln!(
        "image clusterset-dns:test built in {:.1?}: {:.1} MB (base {:.1} MB, binary {:.1} MB)",
        took,
        size / 1e6,
        base / 1e6,
        binary / 1e6
    );
    assert!(
        size <= base + binary + 65536.0,
        "the image ({size} bytes) holds more than its base ({base}) and the binary ({binary})"
    );

    // deploy/base's container, as the kubelet would run it: its user, read-only root, no
    // capabilities, no privilege escalation, and its arguments, but the example file instead
    // of the Kubernetes API and loopback ports (the container shares the host's network).
    let objects = yaml_objects(&kustomize("deploy/base"));
    let dep = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    let user = format!(
        "{}:{}",
        pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
    );
    let (dns_port, admin_port) = (free_udp_tcp_port(), free_udp_tcp_port());
    let mut args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .filter(|a| !a.starts_with("--listen=") && !a.starts_with("--admin-listen="))
        .collect();
    args.extend([
        format!("--listen=127.0.0.1:{dns_port}"),
        format!("--admin-listen=127.0.0.1:{admin_port}"),
        "--file=/data/clusterset.yaml".to_string(),
    ]);
    let mut run = vec![
        "run".to_string(),
        "-d".into(),
        "--network".into(),
        "host".into(),
        "--user".into(),
        user.clone(),
        "--read-only".into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "-v".into(),
        format!("{}/examples:/data:ro", env!("CARGO_MANIFEST_DIR")),
        IMAGE.into(),
    ];
    run.extend(args);
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let container = Container {
        host: &host,
        id: docker(&host, &run),
    };
    let admin = format!("127.0.0.1:{admin_port}").parse().unwrap();
    until(
        Lazy(|| {
            format!(
                "the container to become ready: {}",
                docker(&host, &["logs", &container.id])
            )
        }),
        20,
        || http_get_blocking(admin, "/ready", Duration::from_secs(1)).map(|(s, _)| s) == Some(200),
    );
    let dns = format!("127.0.0.1:{dns_port}").parse().unwrap();
    for tcp in ["", "+tcp"] {
        assert_eq!(
            dig(
                dns,
                &format!("{tcp} +short checkout.shop.svc.clusterset.local")
            ),
            "10.42.0.10\n"
        );
    }
    // It runs as the Deployment's user, and says which revision it was built from.
    assert_eq!(
        docker(&host, &["inspect", "--format", "{{.Config.User}}", IMAGE]),
        "65532:65532"
    );
    let top = docker(&host, &["top", &container.id, "-o", "pid,uid,gid,comm"]);
    assert!(
        top.contains("65532") && top.contains("clusterset-dns"),
        "{top}"
    );
    let (_, metrics) = http_get_blocking(admin, "/metrics", Duration::from_secs(2)).unwrap();
    assert!(
        metrics.contains(&format!("revision=\"{revision}\"")),
        "coredns_build_info carries the revision {revision}"
    );
    // JSON logs, as the Deployment asks, on the container's stderr.
    let logs = Command::new(DOCKER)
        .env("DOCKER_HOST", &host)
        .args(["logs", &container.id])
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&logs.stderr);
    let line = first.lines().next().unwrap_or("");
    assert!(
        serde_json::from_str::<serde_json::Value>(line)
            .is_ok_and(|v| v["fields"]["message"] == "starting"),
        "{line}"
    );
}
