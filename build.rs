//! Records the git revision and the compiler version for `coredns_build_info` and `--version`.
use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    let revision = std::env::var("CLUSTERSET_DNS_REVISION")
        .ok()
        .or_else(|| output("git", &["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(&rustc, &["--version"])
        .and_then(|v| v.split_whitespace().nth(1).map(|v| format!("rustc{v}")))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CLUSTERSET_DNS_REVISION={revision}");
    println!("cargo:rustc-env=CLUSTERSET_DNS_RUSTC={version}");
    println!("cargo:rerun-if-env-changed=CLUSTERSET_DNS_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
