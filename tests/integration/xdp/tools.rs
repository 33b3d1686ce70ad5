//! The XDP tests' tools: the binary started (or failing to start) in the test's namespace,
//! its metrics, sockets that XDP takes or leaves to the kernel, the queries of every kind the
//! behaviour document covers, and a client namespace joined by a veth pair ([`Peer`]).

#[allow(unused_imports)]
use super::*;

pub(super) const ADMIN: &str = "127.0.0.1:9153";

pub(super) fn example() -> String {
    format!("{}/examples/clusterset.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `body` on a thread of its own in a new network namespace with loopback up. Processes
/// the thread starts, and sockets it opens, are in that namespace too.
pub(super) fn in_netns(body: impl FnOnce() + Send + 'static) {
    let t = std::thread::spawn(move || {
        // SAFETY: unshare(2) on this thread alone; no memory is involved.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "making a network namespace for the XDP tests needs root: {}",
            io::Error::last_os_error()
        );
        ip(&["link", "set", "lo", "up"]);
        body();
    });
    if let Err(panic) = t.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Sets an IPv4 setting of lo in this thread's namespace.
pub(super) fn lo_setting(name: &str, value: &str) {
    std::fs::write(format!("/proc/sys/net/ipv4/conf/lo/{name}"), value).unwrap();
}

/// IPv4 answers sent through AF_XDP on lo need these (the server refuses to start otherwise).
pub(super) fn allow_xdp_answers_on_lo() {
    lo_setting("accept_local", "1");
    lo_setting("route_localnet", "1");
}

pub(super) struct Server(pub(super) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn http_get(path: &str) -> Option<(u16, String)> {
    common::http_get_blocking(ADMIN.parse().unwrap(), path, Duration::from_secs(3))
}

/// Starts the binary with `args` and waits until it is ready.
pub(super) fn start(args: &[&str]) -> Server {
    let mut all = vec!["--admin-listen", ADMIN];
    all.extend_from_slice(args);
    start_as(&[], &all)
}

/// The binary from the example data with `args`, run through `wrapper` (a command that runs
/// the rest of its arguments, as setpriv does), if any.
pub(super) fn command(wrapper: &[&str], args: &[&str]) -> Command {
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    cmd.args(["--file", &example(), "--log-level", "warn"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// As [`start`], through `wrapper`, and without an --admin-listen of its own: `args` must put
/// the admin server on [`ADMIN`]'s port.
pub(super) fn start_as(wrapper: &[&str], args: &[&str]) -> Server {
    start_with(command(wrapper, args))
}

/// Starts `cmd` (which must put the admin server on [`ADMIN`]) and waits until it is ready.
pub(super) fn start_with(mut cmd: Command) -> Server {
    let mut server = Server(cmd.spawn().unwrap());
    until("the server to become ready", 10, || {
        if server.0.try_wait().unwrap().is_some() {
            panic!("server exited: {}", server.stderr());
        }
        http_get("/ready").is_some_and(|(s, _)| s == 200)
    });
    server
}

impl Server {
    /// Stops the server and returns what it wrote to stderr.
    pub(super) fn stderr(&mut self) -> String {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let mut err = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        err
    }
}

/// Runs the binary expecting it to fail at start-up; returns its stderr.
pub(super) fn fails(args: &[&str]) -> String {
    let mut all = vec!["--admin-listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    fails_as(&[], &all)
}

/// As [`fails`], through `wrapper`; a server still running after 10 s fails the test.
pub(super) fn fails_as(wrapper: &[&str], args: &[&str]) -> String {
    fails_with(command(wrapper, args))
}

/// Runs `cmd` (from [`command`]) expecting it to fail at start-up; returns its stderr.
pub(super) fn fails_with(mut cmd: Command) -> String {
    let mut server = Server(cmd.spawn().unwrap());
    let status = value(format!("{cmd:?} to fail at start-up"), 10, || {
        server.0.try_wait().unwrap()
    });
    assert!(!status.success(), "{cmd:?} exited 0");
    server.stderr()
}

/// Makes `cmd` run under a seccomp filter that refuses bpf(2) with EPERM and allows every other
/// call, as the default profile of a container runtime that allows bpf(2) only with
/// CAP_SYS_ADMIN does for a container without it.
pub(super) fn refuse_bpf(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    const LOAD_NR: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS, offset 0: the call's number
    const JUMP_EQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let filter = [
        op(LOAD_NR, 0, 0, 0),
        op(JUMP_EQ, 0, 1, libc::SYS_bpf as u32),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    // SAFETY: the closure runs in the child between fork and exec and makes only two prctl
    // calls on memory it owns.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
}

/// A metric's value in a scrape (0 if absent).
pub(super) fn metric(scrape: &str, line_start: &str) -> u64 {
    scrape
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Frames the XDP program handed to the server on `iface`, by receive queue.
pub(super) fn received_by_queue(iface: &str) -> Vec<u64> {
    let (_, scrape) = http_get("/metrics").unwrap();
    let start = format!("clusterset_dns_xdp_received_total{{interface=\"{iface}\",queue=\"");
    scrape
        .lines()
        .filter(|l| l.starts_with(&start))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect()
}

pub(super) fn received() -> u64 {
    received_by_queue("lo").iter().sum()
}

pub(super) fn socket(at: &str) -> UdpSocket {
    let s = UdpSocket::bind(at).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

/// A socket whose datagrams the XDP program leaves to the kernel: IPv4 with a 4-byte options
/// field (no-ops), IPv6 with a hop-by-hop header (padding only).
pub(super) fn socket_past_xdp(at: &str) -> UdpSocket {
    let s = socket(at);
    let (level, opt, value): (i32, i32, &[u8]) = if at.starts_with('[') {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_HOPOPTS,
            &[0, 0, 1, 4, 0, 0, 0, 0],
        )
    } else {
        (libc::IPPROTO_IP, libc::IP_OPTIONS, &[1, 1, 1, 0])
    };
    // SAFETY: setsockopt with a byte buffer of the length passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "{}", io::Error::last_os_error());
    s
}

/// Sends `packet` and returns the answer carrying its ID, if one comes.
pub(super) fn ask(s: &UdpSocket, server: SocketAddr, packet: &[u8]) -> Option<Vec<u8>> {
    s.send_to(packet, server).unwrap();
    let mut buf = [0u8; 65535];
    loop {
        let (n, from) = s.recv_from(&mut buf).ok()?;
        if from == server && packet.len() >= 2 && n >= 2 && buf[..2] == packet[..2] {
            return Some(buf[..n].to_vec());
        }
    }
}

/// Asks `server` for checkout's A record through `s` and fails unless an answer comes.
pub(super) fn answered(s: &UdpSocket, server: &str) {
    let q = query("checkout.shop.svc.clusterset.local", RecordType::A, None);
    let answer = ask(s, server.parse().unwrap(), &q);
    assert!(
        answer.is_some_and(|a| a.len() > q.len()),
        "no answer from {server}"
    );
}

/// Queries of every kind the behaviour document covers, over the example data: each served
/// type and some not served, names that exist, are empty non-terminals, are missing or are out
/// of the zone, 0x20 spelling, no EDNS, small and large EDNS sizes (truncation), EDNS version 1
/// (BADVERS), and every malformed shape.
pub(super) fn cases() -> Vec<(String, Vec<u8>)> {
    let names = [
        "checkout.shop.svc.clusterset.local",
        "frontend.shop.svc.clusterset.local",
        "workers.batch.svc.clusterset.local",
        "db.data.svc.clusterset.local",
        "db-0.central.eu.db.data.svc.clusterset.local",
        "_postgres._tcp.db.data.svc.clusterset.local",
        "_https._tcp.frontend.shop.svc.clusterset.local",
        "fd00-2--31.west.workers.batch.svc.clusterset.local",
        "shop.svc.clusterset.local",
        "nope.shop.svc.clusterset.local",
        "dns-version.clusterset.local",
        "clusterset.local",
        "example.org",
    ];
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::SRV,
        RecordType::TXT,
        RecordType::SOA,
        RecordType::NS,
        RecordType::PTR,
        RecordType::ANY,
        RecordType::MX,
    ];
    let mut out = Vec::new();
    for name in names {
        for spelled in [name.to_string(), mixed_case(name)] {
            for t in types {
                for edns in [None, Some(512), Some(1232), Some(4096)] {
                    out.push((format!("{spelled} {t} {edns:?}"), query(&spelled, t, edns)));
                }
            }
        }
        let mut badvers = query(name, RecordType::A, Some(1232));
        let at = badvers.len() - 6; // OPT TTL: extended rcode, version, flags
        badvers[at] = 1;
        out.push((format!("{name} EDNS version 1"), badvers));
    }
    for (what, packet, _) in malformed("checkout.shop.svc.clusterset.local") {
        out.push((what.to_string(), packet));
    }
    // Each its own ID, so a late answer cannot be taken for another's.
    for (i, (_, p)) in out.iter_mut().enumerate() {
        if p.len() >= 2 {
            p[..2].copy_from_slice(&(i as u16).to_be_bytes());
        }
    }
    out
}

/// A network namespace for clients, joined to the calling thread's by a veth pair, as a pod is
/// to its node: `iface` here (198.18.99.1/24, fd60:d83d:ba89:99::1/64) with `rx` receive queues, and `xb`
/// there (.2, ::2) with `tx` send queues. A thread of its own stays in that namespace and runs
/// there what [`Peer::run`] is given (sockets keep the namespace they were made in).
pub(super) struct Peer {
    pub(super) jobs: Option<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

impl Peer {
    pub(super) fn new(iface: &str, rx: u32, tx: u32) -> Peer {
        let (jobs, queue) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            // SAFETY: unshare(2) on this thread alone.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            // SAFETY: no arguments.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            for job in queue {
                job();
            }
        });
        let tid = tid_rx.recv().unwrap().to_string();
        let (rx, tx) = (rx.to_string(), tx.to_string());
        ip(&[
            "link",
            "add",
            iface,
            "numrxqueues",
            &rx,
            "numtxqueues",
            &rx,
            "type",
            "veth",
            "peer",
            "name",
            "xb",
            "numrxqueues",
            &tx,
            "numtxqueues",
            &tx,
            "netns",
            &tid,
        ]);
        ip(&["addr", "add", "198.18.99.1/24", "dev", iface]);
        ip(&[
            "addr",
            "add",
            "fd60:d83d:ba89:99::1/64",
            "dev",
            iface,
            "nodad",
        ]);
        ip(&["link", "set", iface, "up"]);
        let peer = Peer {
            jobs: Some(jobs),
            thread: Some(thread),
        };
        peer.run(|| {
            ip(&["link", "set", "lo", "up"]);
            ip(&["addr", "add", "198.18.99.2/24", "dev", "xb"]);
            ip(&[
                "addr",
                "add",
                "fd60:d83d:ba89:99::2/64",
                "dev",
                "xb",
                "nodad",
            ]);
            ip(&["link", "set", "xb", "up"]);
        });
        peer
    }

    pub(super) fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        let job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.jobs.as_ref().unwrap().send(job).unwrap();
        rx.recv().expect("the peer's thread panicked")
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
