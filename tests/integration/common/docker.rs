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
    super::run_ok(&mut Command::new(setup)).trim().to_string()
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

/// What the Dockerfile copies into the build: a commit that changes none of these (docs, tests,
/// deploy/) builds the same image.
const IMAGE_INPUTS: [&str; 7] = [
    "Dockerfile",
    "Cargo.toml",
    "Cargo.lock",
    "build.rs",
    "src",
    "benches",
    "examples",
];

/// The revision the image records: the last commit that changed one of its inputs (with
/// `-dirty` when the work tree changes them), so that the engine's layer cache (kept in the
/// test cache) serves a commit that changed nothing the image is built from, instead of
/// minutes of `cargo build --release` for a docs-only commit.
pub fn revision() -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .args(["--"])
            .args(IMAGE_INPUTS)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?} failed");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let last = git(&["log", "-1", "--format=%h", "--abbrev=12"]);
    let dirty = !git(&["status", "--porcelain"]).is_empty();
    if dirty { format!("{last}-dirty") } else { last }
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
