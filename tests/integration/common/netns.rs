//! A network namespace a test makes for itself (needs root, as CI has), with the processes it
//! starts there, each logging to a file of its own; all ended, and the namespace deleted, on
//! drop.

use std::path::Path;
use std::process::{Child, Command, Output};

use super::output_text as text;

pub struct Netns {
    pub name: String,
    pub dir: tempfile::TempDir,
    pub procs: Vec<(&'static str, Child)>,
}

impl Drop for Netns {
    fn drop(&mut self) {
        for (_, c) in self.procs.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

impl Netns {
    /// A new namespace `<prefix>-<pid>-<n>` with its loopback up.
    pub fn new(prefix: &str) -> Netns {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "making a network namespace needs root: {}",
            text(&out)
        );
        let ns = Netns {
            name,
            dir: tempfile::tempdir().unwrap(),
            procs: Vec::new(),
        };
        ns.must(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// `argv` in the namespace, which must succeed; its output.
    pub fn must(&self, argv: &[&str]) -> String {
        super::run_ok(
            Command::new("ip")
                .args(["netns", "exec", &self.name])
                .args(argv),
        )
    }

    pub fn spawn(&mut self, name: &'static str, argv: &[String]) {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(argv)
            .current_dir(self.dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        self.procs.push((name, child));
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// `argv` in the namespace, in a mount namespace of its own (ip netns exec makes one) with
    /// `resolv` over /etc/resolv.conf.
    pub fn run_with_resolv(&self, resolv: &Path, env: &[(&str, &str)], argv: &[String]) -> Output {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, "sh", "-c"])
            .arg("mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"")
            .arg(resolv)
            .args(argv)
            .current_dir(self.dir.path());
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    pub fn dig(&self, server: &str, args: &str) -> String {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                "dig",
                &format!("@{server}"),
                "+time=1",
                "+tries=1",
            ])
            .args(args.split_whitespace())
            .output()
            .unwrap();
        text(&out)
    }
}
