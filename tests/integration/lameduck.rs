//! Stopping without dropping queries: the lame duck on SIGTERM (`--lameduck`), for one instance
//! under a query loop and for a rolling restart of two instances behind a real CoreDNS, and
//! behind kube-dns's dnsmasq.
//!
//! The rollout runs the cluster's data path in a network namespace the test makes for itself
//! (needs root, as CI has): CoreDNS with Corefile.example's `clusterset.local` block, or dnsmasq
//! with kube-dns's flags and deploy/forwarding/kube-dns's stub domain, forwards to
//! a Service address, which iptables DNAT rules spread over the ready instances as kube-proxy's
//! iptables mode does; the test plays the kubelet's readiness probe and the endpoint
//! propagation (one second, as a cluster takes about that to reach every node), and flushes the
//! conntrack entries of a withdrawn instance as kube-proxy does. Instances are replaced as a
//! Deployment with `maxSurge: 1, maxUnavailable: 0` replaces them: the new one is ready first,
//! then the old one gets SIGTERM. Addresses are in 198.18.0.0/15.

use crate::common;
use crate::common::wait::{Lazy, until};

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{BIN, query, tcp_exchange_blocking, udp_exchange_blocking};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;

fn example() -> String {
    format!("{}/examples/clusterset.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// The binary on `dns` and `admin` with the example data and `args`; stderr is collected.
struct Instance {
    child: Child,
    admin: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Instance {
    fn start(dns: SocketAddr, admin: SocketAddr, args: &[&str]) -> Instance {
        let mut child = Command::new(BIN)
            .args(["--file", &example(), "--log-format", "json"])
            .args([
                "--listen",
                &dns.to_string(),
                "--admin-listen",
                &admin.to_string(),
            ])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let keep = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(line);
            }
        });
        let i = Instance { child, admin, log };
        until(
            Lazy(|| format!("ready: {:?}", i.log.lock().unwrap())),
            10,
            || ready(admin) == Some(200),
        );
        i
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// Waits (at most `secs`) for the process to exit; its status and how long that took.
    fn exit(&mut self, secs: u64) -> (std::process::ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "did not exit within {secs} s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The messages of the log lines so far, in order.
    fn messages(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["fields"]["message"].as_str().map(str::to_string))
            .collect()
    }
}

/// The status of `/ready`, or `None` when nothing answers.
fn ready(admin: SocketAddr) -> Option<u16> {
    http(admin, "/ready")
}

fn http(admin: SocketAddr, path: &str) -> Option<u16> {
    common::http_get_blocking(admin, path, Duration::from_millis(500)).map(|(status, _)| status)
}

fn answered_checkout(m: Option<Message>) -> bool {
    m.is_some_and(|m| {
        m.metadata.response_code == ResponseCode::NoError
            && common::a_records(&m) == ["10.42.0.10".parse::<std::net::Ipv4Addr>().unwrap()]
    })
}

#[test]
fn sigterm_keeps_answering_for_the_lame_duck_then_drains_and_exits_0() {
    let _module = common::module(module_path!());
    let port = common::free_udp_tcp_port();
    let admin_port = common::free_udp_tcp_port();
    let dns: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
    let mut s = Instance::start(dns, admin, &["--lameduck", "2s"]);
    let q = query("checkout.shop.svc.clusterset.local", RecordType::A, None);

    // A query loop over UDP and TCP, every 10 ms, until the server is gone (bounded: 10 s).
    let stop = Arc::new(AtomicBool::new(false));
    let loop_stop = stop.clone();
    let client = std::thread::spawn(move || {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let start = Instant::now();
        let mut sent = Vec::new();
        while !loop_stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(10) {
            let at = Instant::now();
            let udp = answered_checkout(udp_exchange_blocking(&sock, dns, &q));
            let tcp = answered_checkout(tcp_exchange_blocking(dns, &q));
            sent.push((at, udp, tcp));
            std::thread::sleep(Duration::from_millis(10));
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(300));
    let term = Instant::now();
    s.signal("TERM");
    // /ready turns 503 at once; /health stays 200 (the liveness probe must not kill it).
    let mut saw_503 = None;
    while term.elapsed() < Duration::from_secs(1) {
        if ready(admin) == Some(503) {
            saw_503 = Some(term.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let saw_503 = saw_503.expect("/ready answers 503 after SIGTERM");
    assert!(
        saw_503 < Duration::from_millis(200),
        "/ready took {saw_503:?}"
    );
    assert_eq!(http(admin, "/health"), Some(200));
    let (status, _) = s.exit(10);
    let took = term.elapsed();
    stop.store(true, Ordering::Relaxed);
    let sent = client.join().unwrap();
    assert!(status.success(), "exit status {status}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "exited {took:?} after SIGTERM"
    );
    // Every query sent before SIGTERM and during the lame duck (but its last 200 ms, when the
    // loop's own exchange may straddle the stop) was answered, over UDP and over TCP.
    let lame = term + Duration::from_millis(1800);
    let during: Vec<_> = sent.iter().filter(|(at, ..)| *at < lame).collect();
    let after_term = during.iter().filter(|(at, ..)| *at >= term).count();
    assert!(
        after_term >= 50,
        "only {after_term} queries in the lame duck"
    );
    let failed: Vec<_> = during.iter().filter(|(_, u, t)| !(*u && *t)).collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed",
        failed.len(),
        during.len()
    );
    let m = s.messages();
    let step = |text: &str| {
        m.iter()
            .position(|l| l.contains(text))
            .unwrap_or_else(|| panic!("no log line {text:?} in {m:?}"))
    };
    assert!(step("shutting down") < step("lame duck: /ready answers 503"));
    assert!(step("lame duck: /ready answers 503") < step("lame duck over"));
    assert!(step("lame duck over") < step("stopped"));
}

#[test]
fn a_second_signal_exits_at_once_and_lameduck_0_stops_at_once() {
    let _module = common::module(module_path!());
    for (args, second, most) in [
        (
            &["--lameduck", "30s"][..],
            Some("INT"),
            Duration::from_secs(1),
        ),
        (&["--lameduck", "0"][..], None, Duration::from_secs(1)),
    ] {
        let port = common::free_udp_tcp_port();
        let admin_port = common::free_udp_tcp_port();
        let mut s = Instance::start(
            format!("127.0.0.1:{port}").parse().unwrap(),
            format!("127.0.0.1:{admin_port}").parse().unwrap(),
            args,
        );
        let start = Instant::now();
        s.signal("TERM");
        if let Some(sig) = second {
            while ready(s.admin) != Some(503) {
                std::thread::sleep(Duration::from_millis(5));
            }
            s.signal(sig);
        }
        let (status, _) = s.exit(10);
        let took = start.elapsed();
        assert!(status.success(), "{args:?}: exit status {status}");
        assert!(took < most, "{args:?}: took {took:?}");
        let m = s.messages();
        if second.is_some() {
            assert!(m.iter().any(|l| l.contains("second signal")), "{m:?}");
        } else {
            assert!(!m.iter().any(|l| l.contains("lame duck")), "{m:?}");
        }
    }
}

#[test]
fn tcp_queries_in_flight_at_the_end_of_the_lame_duck_are_answered() {
    let _module = common::module(module_path!());
    // A pipelined burst sent just before the lame duck ends is answered in full before the
    // connection closes.
    let port = common::free_udp_tcp_port();
    let admin_port = common::free_udp_tcp_port();
    let dns: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut s = Instance::start(
        dns,
        format!("127.0.0.1:{admin_port}").parse().unwrap(),
        &["--lameduck", "1s"],
    );
    let mut c = TcpStream::connect(dns).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let q = query("checkout.shop.svc.clusterset.local", RecordType::A, None);
    let mut burst = Vec::new();
    for _ in 0..500 {
        burst.extend_from_slice(&(q.len() as u16).to_be_bytes());
        burst.extend_from_slice(&q);
    }
    s.signal("TERM");
    std::thread::sleep(Duration::from_millis(950));
    c.write_all(&burst).unwrap();
    let mut answers = 0;
    let mut len = [0u8; 2];
    while c.read_exact(&mut len).is_ok() {
        let mut m = vec![0u8; u16::from_be_bytes(len) as usize];
        c.read_exact(&mut m).unwrap();
        assert!(answered_checkout(Message::from_vec(&m).ok()));
        answers += 1;
    }
    assert_eq!(
        answers, 500,
        "the connection closed after {answers} answers"
    );
    assert!(s.exit(10).0.success());
}

// ---- the rolling restart ----

fn run(cmd: &str, args: &[&str]) -> std::process::Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} runs (apt-get install iptables conntrack iproute2): {e}"))
}

fn must(cmd: &str, args: &[&str]) {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const VIP: &str = "198.18.0.53";

/// kube-proxy's iptables mode for one Service with `backends`: DNAT VIP:53 to each, picked at
/// random with equal chances, for UDP and TCP. The chain is replaced in one iptables-restore.
fn program(backends: &BTreeSet<String>) {
    let mut rules = String::from("*nat\n:CSD-SVC - [0:0]\n");
    let n = backends.len();
    for proto in ["udp", "tcp"] {
        for (i, b) in backends.iter().enumerate() {
            let left = n - i;
            let pick = if left > 1 {
                format!(
                    "-m statistic --mode random --probability {:.5} ",
                    1.0 / left as f64
                )
            } else {
                String::new()
            };
            rules += &format!("-A CSD-SVC -p {proto} {pick}-j DNAT --to-destination {b}:1053\n");
        }
    }
    rules += "COMMIT\n";
    let mut child = Command::new("iptables-restore")
        .arg("--noflush")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "iptables-restore:\n{rules}"
    );
}

/// The endpoints controller, kube-proxy and the kubelet's readiness probe, for the instances
/// listed in `pods`: every 100 ms each pod's `/ready` is read; a change in the ready set is
/// programmed one second after it was seen, and a withdrawn backend's UDP conntrack entries are
/// flushed as kube-proxy flushes them. The set programmed last is kept in `published`.
fn endpoints(
    pods: Arc<Mutex<Vec<String>>>,
    published: Arc<Mutex<BTreeSet<String>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut programmed: BTreeSet<String> = BTreeSet::new();
        let mut pending: Option<(Instant, BTreeSet<String>)> = None;
        while !stop.load(Ordering::Relaxed) {
            let ready_now: BTreeSet<String> = pods
                .lock()
                .unwrap()
                .iter()
                .filter(|p| ready(format!("{p}:9153").parse().unwrap()) == Some(200))
                .cloned()
                .collect();
            if ready_now != programmed && pending.as_ref().is_none_or(|(_, s)| *s != ready_now) {
                pending = Some((Instant::now(), ready_now));
            }
            if let Some((seen, set)) =
                pending.take_if(|(seen, _)| seen.elapsed() >= Duration::from_secs(1))
            {
                let _ = seen;
                if !set.is_empty() {
                    program(&set);
                    for gone in programmed.difference(&set) {
                        // Exit 1 when there was nothing to delete.
                        let _ = run(
                            "conntrack",
                            &["-D", "-p", "udp", "--orig-dst", VIP, "--reply-src", gone],
                        );
                    }
                    programmed = set;
                    *published.lock().unwrap() = programmed.clone();
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// What the client saw: queries sent, and those that failed (timeout, SERVFAIL, wrong answer).
#[derive(Debug, Default)]
struct Seen {
    sent: usize,
    failed: Vec<String>,
    /// Of every query, sorted.
    latencies: Vec<Duration>,
}

impl Seen {
    fn quantile(&self, q: f64) -> Duration {
        self.latencies[((self.latencies.len() - 1) as f64 * q) as usize]
    }
}

impl Seen {
    /// Lookups that stalled: CoreDNS answers this late only after waiting out a query that was
    /// lost (its read timeout is 2 s) and asking again.
    fn stalled(&self) -> usize {
        self.latencies
            .iter()
            .filter(|t| **t > Duration::from_secs(1))
            .count()
    }
}

/// The client's timeout: glibc's default (`timeout:5` in resolv.conf).
const TIMEOUT: Duration = Duration::from_secs(5);

/// What forwards the client's queries to the Service address.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Front {
    /// CoreDNS with Corefile.example's block, forwarding over UDP, or over TCP (`force_tcp`).
    CoreDns { over_tcp: bool },
    /// kube-dns's dnsmasq with deploy/forwarding/kube-dns's stub domain.
    KubeDns,
}

/// kube-dns's dnsmasq, listening on `port` of every address, with the `--server` arguments its
/// dnsmasq-nanny makes of the stub domain deploy/forwarding/kube-dns renders for the Service
/// address [`VIP`] (set through deploy/address). The flags are kube-dns's
/// (kubernetes/kubernetes `cluster/addons/dns/kube-dns/kube-dns.yaml.base`@008b3652, the
/// dnsmasq container's arguments after `--`), but `--port` and, since the test's namespace has
/// no resolver, `--no-resolv`; the nanny turns each stub domain server into `--server`
/// `/<domain>/<ip>` (kubernetes/dns `pkg/dnsmasq/nanny.go`@9aa70b8f).
fn kube_dns(port: u16) -> Child {
    let rendered = common::kustomize_at("deploy/forwarding/kube-dns", VIP);
    let objs = common::yaml_objects(&rendered);
    let stubs: std::collections::BTreeMap<String, Vec<String>> =
        serde_json::from_str(objs[0]["data"]["stubDomains"].as_str().unwrap()).unwrap();
    let mut args: Vec<String> = [
        "-k",
        "--cache-size=1000",
        "--no-negcache",
        "--dns-loop-detect",
        "--log-facility=-",
        "--server=/cluster.local/127.0.0.1#10053",
        "--server=/in-addr.arpa/127.0.0.1#10053",
        "--server=/ip6.arpa/127.0.0.1#10053",
        "--no-resolv",
        "--pid-file=",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("--port={port}"));
    for (domain, servers) in &stubs {
        for server in servers {
            let server = match server.parse::<SocketAddr>() {
                Ok(sa) => format!("{}#{}", sa.ip(), sa.port()),
                Err(_) => server.clone(),
            };
            args.push("--server".into());
            args.push(format!("/{domain}/{server}"));
        }
    }
    Command::new("dnsmasq")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dnsmasq runs (apt-get install dnsmasq-base)")
}

/// Replaces each of two instances in turn (a new one ready first, then SIGTERM to the old one)
/// while a client queries through `front` (320 a second); returns what the client saw.
fn rollout(lameduck: &str, front: Front) -> Seen {
    let pod = |n: u8| format!("198.18.1.{n}");
    let start = |addr: &str| {
        Instance::start(
            format!("{addr}:1053").parse().unwrap(),
            format!("{addr}:9153").parse().unwrap(),
            &["--lameduck", lameduck],
        )
    };
    // A pod's address exists while it runs; once it is gone, packets to it are lost, as they
    // are to a deleted pod (the blackhole route below), not refused.
    for n in 1..=4 {
        must(
            "ip",
            &["addr", "add", &format!("{}/32", pod(n)), "dev", "lo"],
        );
    }
    let pods = Arc::new(Mutex::new(vec![pod(1), pod(2)]));
    let mut running = vec![start(&pod(1)), start(&pod(2))];
    program(&pods.lock().unwrap().iter().cloned().collect());
    let stop = Arc::new(AtomicBool::new(false));
    let programmed = Arc::new(Mutex::new(BTreeSet::new()));
    let controller = endpoints(pods.clone(), programmed.clone(), stop.clone());
    let over_tcp = front == Front::CoreDns { over_tcp: true };
    let mut dnsmasq = None;
    let coredns = (front != Front::KubeDns).then(|| {
        common::coredns::with_clusterset_block(&if over_tcp {
            format!("forward . \"{VIP}\" {{\n        force_tcp\n    }}")
        } else {
            format!("forward . \"{VIP}\"")
        })
    });
    let at: SocketAddr = match &coredns {
        Some(c) => c.addr,
        None => {
            let port = common::free_udp_tcp_port();
            dnsmasq = Some(kube_dns(port));
            let at = format!("127.0.0.1:{port}").parse().unwrap();
            until("dnsmasq to answer", 20, || {
                common::dig(at, "dns-version.clusterset.local TXT +short").contains("1.0.0")
            });
            at
        }
    };
    // A stub like glibc's: CoreDNS asks again by itself when a query is lost; dnsmasq does not,
    // and the client's second attempt (attempts:2) is what recovers it.
    let attempts = if front == Front::KubeDns { 2 } else { 1 };
    let client_stop = Arc::new(AtomicBool::new(false));
    let client = {
        let stop = client_stop.clone();
        std::thread::spawn(move || client(at, attempts, stop))
    };
    std::thread::sleep(Duration::from_millis(500));
    for (old, new) in [(0, 3), (1, 4)] {
        running.push(start(&pod(new)));
        pods.lock().unwrap().push(pod(new));
        // Ready, and in the Service's spread, before the old one goes.
        until(format!("{} programmed", pod(new)), 20, || {
            programmed.lock().unwrap().contains(&pod(new))
        });
        running[old].signal("TERM");
        let (status, _) = running[old].exit(20);
        assert!(status.success());
        let gone = pod(old as u8 + 1);
        must("ip", &["addr", "del", &format!("{gone}/32"), "dev", "lo"]);
        pods.lock().unwrap().retain(|p| *p != gone);
    }
    std::thread::sleep(Duration::from_millis(500));
    client_stop.store(true, Ordering::Relaxed);
    let seen = client.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    controller.join().unwrap();
    drop(coredns);
    if let Some(mut d) = dnsmasq {
        let _ = d.kill();
        let _ = d.wait();
    }
    drop(running);
    // The Service's last endpoints go with the rollout, and kube-proxy deletes the conntrack
    // entries of endpoints that go. Without this, a forwarder in the next rollout that picks a
    // source port one of these flows used is sent to an address whose instance has not started
    // (seen once in three runs: a query unanswered in both attempts).
    let _ = run("conntrack", &["-D", "--orig-dst", VIP]);
    for n in 3..=4 {
        must(
            "ip",
            &["addr", "del", &format!("{}/32", pod(n)), "dev", "lo"],
        );
    }
    seen
}

/// Queries through the forwarder at `front`, 16 every 50 ms, until `stop` (bounded: 60 s), each
/// asked up to `attempts` times, [`TIMEOUT`] apart: a name of its own below a served service (so
/// no cache can answer it; NXDOMAIN is the right answer), and every tenth the service itself
/// (NOERROR with its address).
fn client(front: SocketAddr, attempts: u32, stop: Arc<AtomicBool>) -> Seen {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let started = Instant::now();
        let mut tasks = Vec::new();
        let mut i = 0u32;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
            tick.tick().await;
            // Sixteen at once, as many clients ask: CoreDNS then holds several upstream
            // sockets, each a flow of its own that the DNAT rules send to one instance.
            for _ in 0..16 {
                i += 1;
                let (name, want) = if i % 10 == 0 {
                    (
                        "checkout.shop.svc.clusterset.local".to_string(),
                        ResponseCode::NoError,
                    )
                } else {
                    (
                        format!("q{i}.checkout.shop.svc.clusterset.local"),
                        ResponseCode::NXDomain,
                    )
                };
                tasks.push(tokio::spawn(async move {
                    let q = query(&name, RecordType::A, Some(1232));
                    let sent = Instant::now();
                    let raw = ask_like_a_stub(front, &q, attempts).await;
                    let took = sent.elapsed();
                    let failed = match raw {
                        None => Some(format!(
                            "{name}: no answer in {attempts} attempt(s) of {TIMEOUT:?}"
                        )),
                        Some(raw) => match Message::from_vec(&raw) {
                            Ok(m) if m.metadata.response_code == want => None,
                            Ok(m) => Some(format!("{name}: {}", m.metadata.response_code)),
                            Err(e) => Some(format!("{name}: unparsable: {e}")),
                        },
                    };
                    (took, failed)
                }));
            }
        }
        let mut seen = Seen::default();
        for t in tasks {
            seen.sent += 1;
            let (took, failed) = t.await.unwrap();
            seen.latencies.push(took);
            seen.failed.extend(failed);
        }
        seen.latencies.sort();
        seen
    })
}

/// Asks `front` as glibc's stub resolver does: one UDP socket for every attempt, so a second
/// attempt is the same query (same ID) from the same port, [`TIMEOUT`] after the first
/// (glibc `resolv/res_send.c` keeps a server's socket open across tries; only the
/// `single-request-reopen` option opens a new one only between the A and AAAA queries;
/// bminor/glibc `resolv/res_send.c`@ef321e23). dnsmasq sends such a retry again to every server
/// of the domain, while a query from a new port within 2 s of a pending one only waits for its
/// answer (imp/dnsmasq `src/forward.c` `forward_query`@b6769234, v2.90).
async fn ask_like_a_stub(front: SocketAddr, q: &[u8], attempts: u32) -> Option<Vec<u8>> {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut buf = vec![0u8; 65535];
    for _ in 0..attempts {
        sock.send_to(q, front).await.unwrap();
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        // A late answer to an earlier attempt has the same ID and answers this one too.
        while let Ok(got) = tokio::time::timeout_at(deadline, sock.recv_from(&mut buf)).await {
            let (n, from) = got.unwrap();
            if from == front && n >= 2 && buf[..2] == q[..2] {
                return Some(buf[..n].to_vec());
            }
        }
    }
    None
}

#[test]
fn rolling_restart_behind_coredns_or_kube_dns_and_a_service_address_loses_no_query() {
    let _module = common::module(module_path!());
    let t = std::thread::spawn(|| {
        // SAFETY: unshare(2) on this thread alone; processes it starts share the namespace.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "a network namespace needs root: {}",
            std::io::Error::last_os_error()
        );
        must("ip", &["link", "set", "lo", "up"]);
        must("ip", &["addr", "add", &format!("{VIP}/32"), "dev", "lo"]);
        must("ip", &["route", "add", "blackhole", "198.18.1.0/24"]);
        must("iptables", &["-t", "nat", "-N", "CSD-SVC"]);
        for proto in ["udp", "tcp"] {
            must(
                "iptables",
                &[
                    "-t", "nat", "-A", "OUTPUT", "-d", VIP, "-p", proto, "--dport", "53", "-j",
                    "CSD-SVC",
                ],
            );
        }
        // Corefile.example's block (UDP to the Service), and the same forwarding over TCP,
        // as node-local-dns forwards to its upstreams (force_tcp).
        let udp = rollout("5s", Front::CoreDns { over_tcp: false });
        let tcp = rollout("5s", Front::CoreDns { over_tcp: true });
        // kube-dns: its dnsmasq with the shipped stub domain.
        let kube_dns = rollout("5s", Front::KubeDns);
        // The same rollout without a lame duck loses queries: the test can tell.
        let without = rollout("0", Front::CoreDns { over_tcp: false });
        let kube_dns_without = rollout("0", Front::KubeDns);
        (udp, tcp, kube_dns, without, kube_dns_without)
    });
    let (udp, tcp, kube_dns, without, kube_dns_without) =
        t.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    for (what, seen) in [
        ("CoreDNS, UDP, lame duck", &udp),
        ("CoreDNS, TCP, lame duck", &tcp),
        ("kube-dns's dnsmasq, lame duck", &kube_dns),
        ("CoreDNS, UDP, no lame duck", &without),
        ("kube-dns's dnsmasq, no lame duck", &kube_dns_without),
    ] {
        eprintln!(
            "rollout ({what}): {} sent, {} failed, {} stalled over 1 s; latency p50 {:?} p99 {:?} max {:?}",
            seen.sent,
            seen.failed.len(),
            seen.stalled(),
            seen.quantile(0.5),
            seen.quantile(0.99),
            seen.quantile(1.0),
        );
    }
    for seen in [&udp, &tcp, &kube_dns] {
        assert!(seen.sent > 4000, "{seen:?}");
        assert!(
            seen.failed.is_empty(),
            "failed during the rollout: {:?}",
            seen.failed
        );
    }
    // Over TCP nothing even stalls. Over UDP a reply that is on its way at the instant
    // kube-proxy flushes the withdrawn instance's conntrack entries is lost (it no longer
    // matches the client's flow) and CoreDNS asks again after 2 s: a race of kube-proxy's that
    // no server can close, seen here in about one run in three, so UDP stalls are reported,
    // not asserted.
    assert_eq!(
        tcp.stalled(),
        0,
        "{:?}",
        &tcp.latencies[tcp.latencies.len() - 5..]
    );
    for without in [&without, &kube_dns_without] {
        assert!(
            without.failed.len() + without.stalled() > 0,
            "without a lame duck nothing failed or stalled: the harness cannot tell ({} sent)",
            without.sent
        );
    }
}
