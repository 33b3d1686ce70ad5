//! A real CoreDNS (built once by tests/coredns/setup.sh) on a loopback port, killed on drop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct CoreDns {
    child: Child,
    pub addr: SocketAddr,
    pub corefile: String,
    dir: tempfile::TempDir,
}

impl Drop for CoreDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn binary() -> PathBuf {
    binary_at("v1.15.0")
}

/// The `clusterset.local:53 { … }` block of Corefile.example, as written there.
pub fn clusterset_block() -> String {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Corefile.example"))
            .unwrap();
    let start = text
        .lines()
        .position(|l| l.starts_with("clusterset.local:53 {"))
        .expect("Corefile.example has a clusterset.local:53 block");
    let lines: Vec<&str> = text.lines().skip(start).collect();
    let end = lines
        .iter()
        .position(|l| *l == "}")
        .expect("the block ends with a lone }");
    lines[..=end].join("\n") + "\n"
}

impl CoreDns {
    /// Runs CoreDNS with the Corefile `corefile(port)` for a free loopback port, and waits
    /// (`wait_secs` at most) until `dig <probe>` through it prints a line containing `expect`.
    pub fn start(
        corefile: impl Fn(u16) -> String,
        probe: &str,
        expect: &str,
        wait_secs: u64,
    ) -> CoreDns {
        let port = super::free_udp_tcp_port();
        let corefile = corefile(port);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Corefile"), &corefile).unwrap();
        let child = Command::new(binary())
            .args(["-conf", "Corefile"])
            .current_dir(dir.path())
            .stdout(std::fs::File::create(dir.path().join("coredns.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let c = CoreDns {
            child,
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            corefile,
            dir,
        };
        super::until(
            super::wait::Lazy(|| {
                format!(
                    "CoreDNS to answer {probe}; Corefile:\n{}\nlog:\n{}",
                    c.corefile,
                    std::fs::read_to_string(c.dir.path().join("coredns.log")).unwrap_or_default()
                )
            }),
            wait_secs,
            || super::dig(c.addr, probe).contains(expect),
        );
        c
    }
}

/// CoreDNS at `version`, one tests/coredns/setup.sh pins, built once.
pub fn binary_at(version: &str) -> PathBuf {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/coredns/setup.sh");
    let out = Command::new(&setup)
        .arg(version)
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/coredns/setup.sh runs");
    assert!(
        out.status.success(),
        "tests/coredns/setup.sh {version} failed"
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// CoreDNS running Corefile.example's clusterset.local block as shipped, but listening on a
/// free loopback port (bound to 127.0.0.1 only) and with its forward line replaced by
/// `forward` (the address between the quotes, and any options); ready once it answers the
/// zone's dns-version through that forward.
pub fn with_clusterset_block(forward: &str) -> CoreDns {
    let block = clusterset_block();
    assert!(block.contains("    forward . \"10.96.0.53\"\n"), "{block}");
    CoreDns::start(
        |port| {
            block
                .replacen(
                    "clusterset.local:53 {",
                    &format!("clusterset.local:{port} {{\n    bind 127.0.0.1"),
                    1,
                )
                .replace("forward . \"10.96.0.53\"", forward)
        },
        "dns-version.clusterset.local TXT +short",
        "1.0.0",
        20,
    )
}
