//! Test harness: starts the server in-process on 127.0.0.1:0 from a fixture file and queries it
//! over UDP and TCP with hickory-proto messages.
#![allow(dead_code)]

pub mod coredns;
pub mod docker;
pub mod grafana;
pub mod k8s;
mod malformed;
pub mod netns;
pub mod node;
pub mod prometheus;
mod turns;
pub mod wait;

#[allow(unused_imports)]
pub use malformed::malformed;
#[allow(unused_imports)]
pub use turns::{Steps, module};

#[allow(unused_imports)]
pub use wait::{eventually, until};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clusterset_dns::dns::{tcp, udp};
use clusterset_dns::server::{self, Listeners, Shutdown};
use clusterset_dns::source::file;
use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::RecordType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct Server {
    pub dns: SocketAddr,
    pub admin: SocketAddr,
    pub shutdown: Shutdown,
    pub task: tokio::task::JoinHandle<Result<(), clusterset_dns::RunError>>,
    /// Keeps the fixture file alive.
    pub dir: tempfile::TempDir,
    pub file: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.now();
    }
}

pub fn config(file: &Path, zones: &[&str]) -> clusterset_dns::Config {
    clusterset_dns::Config {
        zone: clusterset_dns::zone::Config {
            zones: clusterset_dns::zone::Zones::parse(zones).unwrap(),
            ttl: 5,
            ns_addresses: vec![],
            limits: clusterset_dns::zone::build::Limits::NONE,
        },
        server: server::Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            admin: "127.0.0.1:0".parse().unwrap(),
            // Two UDP workers, so tests cross the SO_REUSEPORT spread.
            udp: udp::Config { workers: 2 },
            xdp: None,
            tcp: tcp::Config {
                idle_timeout: Duration::from_secs(5),
                max_connections: 64,
                allow_transfer: vec![],
                // Two workers, so tests cross the hand-over of connections between them; and
                // the default pacing, which waits only at thousands of queries a second.
                workers: 2,
                coalesce: tcp::parse_coalesce("auto").unwrap(),
            },
            query_log: false,
            grace: Duration::from_secs(1),
            lameduck: Duration::ZERO,
        },
        source: clusterset_dns::source::Config::default(),
        origin: clusterset_dns::Origin::File(file::Config {
            path: file.to_path_buf(),
            poll: Duration::from_millis(50),
        }),
    }
}

/// Starts a server on `yaml` with the given config tweaks.
pub async fn start_with(yaml: &str, tweak: impl FnOnce(&mut clusterset_dns::Config)) -> Server {
    start_on("127.0.0.1:0", yaml, tweak).await
}

/// Starts a server listening for DNS on `listen` (port 0: any free port).
pub async fn start_on(
    listen: &str,
    yaml: &str,
    tweak: impl FnOnce(&mut clusterset_dns::Config),
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("objects.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut cfg = config(&path, &["clusterset.local"]);
    cfg.server.listen = listen.parse().unwrap();
    tweak(&mut cfg);
    let listeners = Listeners::bind(&cfg.server).unwrap();
    let (dns, admin) = (listeners.dns_addr(), listeners.admin_addr());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(clusterset_dns::run(cfg, listeners, shutdown.clone()));
    let server = Server {
        dns,
        admin,
        shutdown,
        task,
        dir,
        file: path,
    };
    // Serving starts right after the first load; wait until the zone is synced.
    for _ in 0..200 {
        if http_get(admin, "/ready").await.map(|(s, _)| s) == Some(200) {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("server did not become ready");
}

pub async fn start(yaml: &str) -> Server {
    start_with(yaml, |_| {}).await
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Udp,
    Tcp,
}

/// Query bytes built by hand (hickory's encoder folds the case of some labels, and tests must
/// send exactly the spelling they mean). `edns` is the advertised UDP payload size.
pub fn query(name: &str, qtype: RecordType, edns: Option<u16>) -> Vec<u8> {
    let mut m = rand_id().to_be_bytes().to_vec();
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, edns.is_some() as u8]);
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&u16::from(qtype).to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    if let Some(size) = edns {
        m.extend_from_slice(&[0, 0, 41]);
        m.extend_from_slice(&size.to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    m
}

/// Sends raw bytes and returns the raw answer, or `None` when nothing comes back in time.
pub async fn exchange_raw(
    server: SocketAddr,
    proto: Proto,
    packet: &[u8],
    wait: Duration,
) -> Option<Vec<u8>> {
    match proto {
        Proto::Udp => {
            let any = if server.is_ipv6() {
                "[::1]:0"
            } else {
                "127.0.0.1:0"
            };
            let sock = tokio::net::UdpSocket::bind(any).await.unwrap();
            sock.send_to(packet, server).await.unwrap();
            let mut buf = vec![0u8; 65535];
            let n = tokio::time::timeout(wait, sock.recv(&mut buf))
                .await
                .ok()?
                .unwrap();
            buf.truncate(n);
            Some(buf)
        }
        Proto::Tcp => {
            let mut s = tokio::net::TcpStream::connect(server).await.unwrap();
            let mut framed = (packet.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(packet);
            s.write_all(&framed).await.unwrap();
            tokio::time::timeout(wait, read_framed(&mut s))
                .await
                .ok()?
                .ok()
        }
    }
}

/// One DNS message off a TCP stream: its two-byte length, then that many bytes.
pub async fn read_framed(s: &mut (impl tokio::io::AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let len = s.read_u16().await? as usize;
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

/// Sends `q` and parses the answer, checking it answers this query.
pub async fn exchange(server: SocketAddr, proto: Proto, q: &[u8]) -> Message {
    let raw = exchange_raw(server, proto, q, Duration::from_secs(3))
        .await
        .expect("an answer");
    let m = Message::from_vec(&raw).unwrap_or_else(|e| panic!("unparsable answer {raw:?}: {e}"));
    assert_eq!(m.metadata.id, u16::from_be_bytes([q[0], q[1]]));
    assert_eq!(m.metadata.message_type, MessageType::Response);
    m
}

/// Blocking UDP exchange: sends `packet` from `sock` and returns the answer from `server` that
/// carries the packet's ID, or `None` once the socket's read timeout passes without one.
pub fn udp_exchange_blocking(
    sock: &std::net::UdpSocket,
    server: SocketAddr,
    packet: &[u8],
) -> Option<Message> {
    sock.send_to(packet, server).ok()?;
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, from) = sock.recv_from(&mut buf).ok()?;
        if from == server && n >= 2 && buf[..2] == packet[..2] {
            return Message::from_vec(&buf[..n]).ok();
        }
    }
}

/// Blocking TCP exchange of one query on a new connection (3 s read timeout).
pub fn tcp_exchange_blocking(server: SocketAddr, packet: &[u8]) -> Option<Message> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(server).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    let mut framed = (packet.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(packet);
    s.write_all(&framed).ok()?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).ok()?;
    Message::from_vec(&buf).ok()
}

/// The addresses of the A records in an answer, in answer order.
pub fn a_records(m: &Message) -> Vec<std::net::Ipv4Addr> {
    m.answers
        .iter()
        .filter_map(|r| match r.data {
            hickory_proto::rr::RData::A(a) => Some(a.0),
            _ => None,
        })
        .collect()
}

/// Flips the case of every other letter, to check that 0x20 spelling survives.
pub fn mixed_case(name: &str) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// Minimal HTTP GET: status and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// A series as name plus sorted `label="value"` pairs, so label order does not matter.
fn series_key(series: &str) -> (String, Vec<String>) {
    match series.split_once('{') {
        Some((name, labels)) => {
            let labels = labels.trim_end_matches('}');
            let mut pairs: Vec<String> = labels
                .split("\",")
                .filter(|p| !p.is_empty())
                .map(|p| p.trim_end_matches('"').to_string())
                .collect();
            pairs.sort();
            (name.to_string(), pairs)
        }
        None => (series.to_string(), vec![]),
    }
}

/// The value of one series in the text exposition (name and labels, in any label order), 0
/// when absent.
pub fn metric_in(body: &str, series: &str) -> f64 {
    let want = series_key(series);
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            (series_key(s) == want).then(|| v.trim().parse().unwrap())
        })
        .unwrap_or(0.0)
}

/// The value of one series on the server's `/metrics`, 0 when absent.
pub async fn metric(addr: SocketAddr, series: &str) -> f64 {
    let (_, body) = http_get(addr, "/metrics").await.unwrap();
    metric_in(&body, series)
}

fn rand_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(4242);
    NEXT.fetch_add(7919, Ordering::Relaxed)
}

/// A blocking HTTP GET of `path` on `addr`: the status and the body, or `None` when nothing
/// answers within `wait` (to connect, and to read).
pub fn http_get_blocking(addr: SocketAddr, path: &str, wait: Duration) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, wait).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Some((status, body.to_string()));
    }
    // A large answer comes in chunks: `<size in hex>\r\n<data>\r\n`, until a size of 0.
    let (mut rest, mut whole) = (body, String::new());
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some((status, whole));
        }
        whole.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
}

// ---- the built binary, run as a user runs it ----

pub const BIN: &str = env!("CARGO_BIN_EXE_clusterset-dns");

/// A finished command's standard output then standard error, for assertion messages.
/// Runs `cmd` and returns what it printed on stdout; a command that cannot start, or that
/// fails, fails the test with the command and everything it printed (stdout, then stderr).
pub fn run_ok(cmd: &mut std::process::Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} cannot start: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}{}", out.status, {
        let said = output_text(&out);
        if said.is_empty() {
            String::new()
        } else {
            format!("\n{said}")
        }
    });
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A process a test started, ended by its PID when dropped.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Running {
    pub child: std::process::Child,
    pub dns: SocketAddr,
    pub admin: SocketAddr,
    /// Every log line so far (JSON).
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// Sends the process signal `name` (`HUP`, `TERM`, …) with `kill`.
    pub fn signal(&self, name: &str) {
        run_ok(
            std::process::Command::new("kill")
                .args([format!("-{name}"), self.child.id().to_string()]),
        );
    }

    /// Whether some log line so far contains `text`.
    pub fn logged(&self, text: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(text))
    }
}

/// Starts the binary with `args` on loopback port 0 and reads the bound addresses from its JSON
/// log (kept in `log`).
pub fn spawn_binary(args: &[&str]) -> Running {
    spawn_program(BIN, args)
}

/// [`spawn_binary`] for the build at `bin` (a benchmark's side-by-side runs).
pub fn spawn_program(bin: &str, args: &[&str]) -> Running {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Instant;
    let mut child = Command::new(bin)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            keep.lock().unwrap().push(line.clone());
            let _ = tx.send(line);
        }
    });
    let (mut dns, mut admin) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(10);
    while dns.is_none() || admin.is_none() {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the server logs its addresses");
        let v: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
        let msg = v["fields"]["message"].as_str().unwrap_or("");
        let addr = v["fields"]["address"].as_str().and_then(|a| a.parse().ok());
        if msg == "DNS listening on UDP" {
            dns = addr;
        } else if msg.starts_with("admin HTTP listening") {
            admin = addr;
        }
    }
    Running {
        child,
        dns: dns.unwrap(),
        admin: admin.unwrap(),
        log,
    }
}

/// Runs `dig` against `dns` with `args` and returns its output.
pub fn dig(dns: SocketAddr, args: &str) -> String {
    let out = std::process::Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &dns.port().to_string(),
            "+norec",
            "+time=2",
            "+tries=1",
        ])
        .args(args.split_whitespace())
        .output()
        .expect("dig runs (apt-get install bind9-dnsutils)");
    String::from_utf8(out.stdout).unwrap()
}

/// `dig +short` lines, sorted.
pub fn short(dns: SocketAddr, name: &str) -> Vec<String> {
    let mut v: Vec<String> = dig(dns, &format!("+short {name}"))
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Whether the spawned server's `/ready` says 200.
pub fn ready(s: &Running) -> bool {
    block_on(http_get(s.admin, "/ready")).map(|(c, _)| c) == Some(200)
}

/// One series' value from the spawned server's `/metrics`.
pub fn metric_value(s: &Running, series: &str) -> f64 {
    block_on(metric(s.admin, series))
}

/// An A query for `name`; the first A record's address.
pub fn query_a(
    dns: SocketAddr,
    sock: &std::net::UdpSocket,
    name: &str,
) -> Option<std::net::Ipv4Addr> {
    let m = udp_exchange_blocking(sock, dns, &query(name, RecordType::A, None))?;
    a_records(&m).first().copied()
}

/// The `p` quantile (0 to 1) of `sorted`, the nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A loopback port free for both UDP and TCP.
pub fn free_udp_tcp_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Runs `clusterset-dns zone ARGS`: whether it succeeded, what it printed, what it said.
pub fn zone_command(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(BIN)
        .arg("zone")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The records of master-file text (`dig` output, `clusterset-dns zone`), one normalized line
/// each (fields joined by one space), comments dropped, SOA serials blanked: two processes'
/// zones number their serials from their own clocks.
pub fn master_records(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| {
            let mut f: Vec<&str> = l.split_whitespace().collect();
            if f.get(3) == Some(&"SOA") && f.len() > 6 {
                f[6] = "SERIAL";
            }
            f.join(" ")
        })
        .collect()
}

/// Runs `cmd` with `input` on its standard input; its output, both streams captured (an error
/// if it cannot be started).
pub fn output_with_input(
    cmd: &mut std::process::Command,
    input: &str,
) -> std::io::Result<std::process::Output> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().unwrap().write_all(input.as_bytes())?;
    child.wait_with_output()
}

/// Runs `promtool check metrics` on a scrape and fails on any error or lint finding.
pub fn promtool_check(scrape: &str) {
    let out = output_with_input(
        std::process::Command::new("promtool").args(["check", "metrics"]),
        scrape,
    )
    .expect("promtool runs (apt-get install prometheus)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool check metrics: {said}");
    assert!(said.is_empty(), "promtool has lint findings: {said}");
}

/// `kubectl kustomize` of `dir` (relative to the repository).
pub fn kustomize(dir: &str) -> String {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    run_ok(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&base),
    )
}

/// The address deploy/address gives the Service and every forward, as shipped.
pub const SHIPPED_ADDRESS: &str = "10.96.0.53";

/// A copy of deploy/ at `to` whose one address (deploy/address) is `address`, changed in the
/// one line its header tells an operator to change.
pub fn deploy_copy_at(to: &Path, address: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&repo.join("deploy"), to);
    let component = to.join("address/kustomization.yaml");
    let text = std::fs::read_to_string(&component).unwrap();
    let shipped = format!("- address={SHIPPED_ADDRESS}\n");
    assert_eq!(text.matches(&shipped).count(), 1, "{text}");
    std::fs::write(
        &component,
        text.replace(&shipped, &format!("- address={address}\n")),
    )
    .unwrap();
}

/// `kubectl kustomize` of `dir` (relative to the repository, under deploy/) in a copy of
/// deploy/ whose one address is `address` ([`deploy_copy_at`]).
pub fn kustomize_at(dir: &str, address: &str) -> String {
    let copy = tempfile::tempdir().unwrap();
    deploy_copy_at(&copy.path().join("deploy"), address);
    run_ok(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(copy.path().join(dir)),
    )
}

/// A copy of the tree `from` at `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy_dir(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
}

/// The documents of a YAML stream.
pub fn yaml_objects(rendered: &str) -> Vec<serde_json::Value> {
    serde_yaml_ng::Deserializer::from_str(rendered)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

/// The monitoring tools tests/monitoring/setup.sh builds once: `bin/helm`, `bin/controller-gen`
/// and `crds/` (the prometheus-operator's CRDs).
pub fn monitoring_tools() -> std::path::PathBuf {
    let out = std::process::Command::new("bash")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/monitoring/setup.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("tests/monitoring/setup.sh runs");
    assert!(out.status.success(), "tests/monitoring/setup.sh failed");
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `helm` from tests/monitoring/setup.sh, run in the repository, with its cache, config and data
/// under `home` (no user's repositories or plugins).
pub fn helm(home: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(monitoring_tools().join("bin/helm"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    c
}
