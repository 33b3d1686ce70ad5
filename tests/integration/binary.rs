//! The built binary, as a user runs it: the example data queried with `dig`, SIGHUP reload,
//! SIGTERM shutdown, and start-up errors. Needs `dig` (Debian: bind9-dnsutils).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::wait::{until, value};
use common::{BIN, dig, spawn_binary};

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/clusterset.yaml")
}

#[test]
fn dig_against_the_example_data() {
    let _module = common::module(module_path!());
    let s = spawn_binary(&["--file", example().to_str().unwrap()]);
    let cases = [
        ("checkout.shop.svc.clusterset.local +short", "10.42.0.10\n"),
        (
            "frontend.shop.svc.clusterset.local AAAA +short",
            "fd00:10:42::20\n",
        ),
        (
            "_https._tcp.frontend.shop.svc.clusterset.local SRV +short",
            "0 50 443 frontend.shop.svc.clusterset.local.\n",
        ),
        (
            "db.data.svc.clusterset.local +short",
            "10.1.0.11\n10.1.0.12\n10.3.0.21\n",
        ),
        (
            "_postgres._tcp.db.data.svc.clusterset.local SRV +short",
            "0 33 5432 db-0.east.db.data.svc.clusterset.local.\n0 33 5432 db-1.east.db.data.svc.clusterset.local.\n0 33 5432 db-0.central.eu.db.data.svc.clusterset.local.\n",
        ),
        (
            "db-0.central.eu.db.data.svc.clusterset.local +short",
            "10.3.0.21\n",
        ),
        ("db-2.east.db.data.svc.clusterset.local +short", ""),
        (
            "10-2-0-31.west.workers.batch.svc.clusterset.local +short",
            "10.2.0.31\n",
        ),
        (
            "fd00-2--31.west.workers.batch.svc.clusterset.local AAAA +short",
            "fd00:2::31\n",
        ),
        ("cache.shop.svc.clusterset.local +short", "10.96.14.2\n"),
        ("dns-version.clusterset.local TXT +short", "\"1.0.0\"\n"),
    ];
    // An RRset has no order: compare the lines as sets.
    let sorted = |s: &str| {
        let mut l: Vec<String> = s.lines().map(str::to_string).collect();
        l.sort();
        l
    };
    for (args, want) in cases {
        assert_eq!(sorted(&dig(s.dns, args)), sorted(want), "dig {args}");
        assert_eq!(
            sorted(&dig(s.dns, &format!("{args} +tcp"))),
            sorted(want),
            "dig {args} +tcp"
        );
    }
    let nx = dig(s.dns, "nope.shop.svc.clusterset.local");
    assert!(
        nx.contains("status: NXDOMAIN") && nx.contains("flags: qr aa;"),
        "{nx}"
    );
    assert!(
        nx.contains("IN\tSOA\tns.dns.clusterset.local. hostmaster.clusterset.local."),
        "{nx}"
    );
    let refused = dig(s.dns, "example.com");
    assert!(refused.contains("status: REFUSED"), "{refused}");
    let http = Command::new("curl")
        .args(["-s", &format!("http://{}/ready", s.admin)])
        .output();
    if let Ok(out) = http {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\n");
    }
}

#[test]
fn sighup_reloads_and_sigterm_stops_cleanly() {
    let _module = common::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::copy(example(), &file).unwrap();
    // Polling is slow here, so only SIGHUP can explain a prompt reload.
    let mut s = spawn_binary(&[
        "--file",
        file.to_str().unwrap(),
        "--file-poll-interval",
        "60m",
    ]);
    assert_eq!(
        dig(s.dns, "checkout.shop.svc.clusterset.local +short"),
        "10.42.0.10\n"
    );
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("10.42.0.10", "10.42.0.99");
    std::fs::write(&file, text).unwrap();
    s.signal("HUP");
    until("SIGHUP to reload the file", 5, || {
        dig(s.dns, "checkout.shop.svc.clusterset.local +short") == "10.42.0.99\n"
    });
    s.signal("TERM");
    let status = value("SIGTERM to stop the server", 10, || {
        s.child.try_wait().unwrap()
    });
    assert!(status.success(), "exit status {status}");
}

#[test]
fn startup_errors_are_one_clear_line_and_a_failure_exit() {
    let _module = common::module(module_path!());
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = run(&[
        "--file",
        "/nonexistent/objects.yaml",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert!(!ok);
    assert!(
        err.lines()
            .any(|l| l.starts_with("clusterset-dns: cannot read /nonexistent/objects.yaml")),
        "{err}"
    );
    let (ok, err) = run(&["--file", "x", "--ttl", "minus"]);
    assert!(
        !ok && err.lines().count() == 1 && err.contains("--ttl"),
        "{err}"
    );
    let (ok, err) = run(&["--file", "x", "--no-such-flag"]);
    assert!(
        !ok && err.lines().count() == 1 && err.contains("--no-such-flag"),
        "{err}"
    );
    let (ok, err) = run(&["--file", "x", "--zone", "a..b"]);
    assert!(
        !ok && err.trim()
            == "clusterset-dns: zone \"a..b\" is not a DNS name short enough to hold service names",
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "kind: [\n").unwrap();
    let (ok, err) = run(&[
        "--file",
        bad.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert!(!ok && err.contains("is not valid YAML or JSON"), "{err}");
    let (ok, err) = run(&["--version"]);
    assert!(ok, "{err}");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--file",
        "--listen",
        "--admin-listen",
        "--zone",
        "--ttl",
        "--log-format",
        "CLUSTERSET_DNS_FILE",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

/// Text logs carry colours only for a person at a terminal: through a pipe (a container's log,
/// a file, journald) the start-up line is plain `key=value` text, and NO_COLOR turns the
/// colours off at a terminal too (`script` gives the server a pseudo-terminal).
#[test]
fn text_logs_are_plain_unless_a_person_is_at_a_terminal() {
    let _module = common::module(module_path!());
    let server = format!(
        "timeout -s TERM 1 '{BIN}' --file '{}' --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0",
        example().display()
    );
    let run = |terminal: bool, no_color: bool| {
        let mut cmd = if terminal {
            let mut c = Command::new("script");
            c.args(["-q", "-e", "-c", &server, "/dev/null"]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("{server} 2>&1")]);
            c
        };
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains("starting"), "{cmd:?}: {text}");
        text
    };
    let piped = run(false, false);
    assert!(!piped.contains('\x1b'), "{piped:?}");
    let line = piped.lines().find(|l| l.contains("starting")).unwrap();
    assert!(
        line.contains(" INFO ") && line.contains("udp_workers="),
        "{line}"
    );
    assert!(
        run(true, false).contains("\x1b["),
        "no colours at a terminal"
    );
    assert!(
        !run(true, true).contains('\x1b'),
        "colours despite NO_COLOR"
    );
}
