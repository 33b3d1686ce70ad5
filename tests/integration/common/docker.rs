//! The tests' own Docker engine (tests/image/setup.sh) and the image built from the
//! repository's Dockerfile on it, for tests/integration/image.rs and tests/integration/cluster.rs.

use std::process::Command;
use std::time::{Duration, Instant};

pub const DOCKER: &str = "/usr/bin/docker";
/// The tag the tests build the Dockerfile under.
pub const IMAGE: &str = "clusterset-dns:test";

/// Starts the engine and makes the base images; returns the engine's address.
pub fn engine() -> String {
    let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/image/setup.sh");
    let out = Command::new(setup)
        .output()
        .expect("tests/image/setup.sh runs");
    assert!(
        out.status.success(),
        "tests/image/setup.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub fn docker(host: &str, args: &[&str]) -> String {
    let out = Command::new(DOCKER)
        .env("DOCKER_HOST", host)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "docker {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The checkout's short revision, as the image records it.
pub fn revision() -> String {
    let out = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Builds the Dockerfile as it is, with the host's network (the build stage fetches crates), as
/// [`IMAGE`]; returns how long the build took.
pub fn build_image(host: &str) -> Duration {
    let started = Instant::now();
    docker(
        host,
        &[
            "build",
            "--network",
            "host",
            "--build-arg",
            &format!("REVISION={}", revision()),
            "-t",
            IMAGE,
            env!("CARGO_MANIFEST_DIR"),
        ],
    );
    started.elapsed()
}
