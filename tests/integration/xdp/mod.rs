//! The AF_XDP path (`--xdp lo`), run as the binary inside a network namespace of the test's
//! own, so the XDP program, the sockets and the loopback settings it needs touch nothing outside
//! it. Needs root (CI runs as root): making a namespace takes CAP_SYS_ADMIN, and XDP takes
//! CAP_NET_ADMIN and CAP_BPF.
//!
//! The program hands plain UDP queries to the server's AF_XDP socket and leaves the rest (here:
//! datagrams with IP options or an IPv6 hop-by-hop header) to the kernel and the ordinary
//! sockets. Sending every query both ways compares the two paths of one server byte for byte.

use crate::common;
use crate::common::wait::{Lazy, until, value};

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{BIN, malformed, mixed_case, query};
use hickory_proto::rr::RecordType;

mod tools;

use tools::*;

#[test]
fn answers_through_xdp_are_the_sockets_answers_byte_for_byte() {
    let _module = common::module(module_path!());
    in_netns(|| {
        allow_xdp_answers_on_lo();
        let _server = start(&["--listen", "[::]:53", "--xdp", "lo"]);
        let cases = cases();
        for (client, server) in [("127.0.0.1:0", "127.0.0.1:53"), ("[::1]:0", "[::1]:53")] {
            let server: SocketAddr = server.parse().unwrap();
            let (plain, past) = (socket(client), socket_past_xdp(client));
            same_answers_both_ways(&cases, &plain, &past, server, "lo");
            // Queries of any size the sockets take: frames longer than the AF_XDP socket's
            // (1,792 bytes with headers, at most) are left to the sockets, at the exact limit.
            let headers = if server.is_ipv4() {
                14 + 20 + 8
            } else {
                14 + 40 + 8
            };
            for size in [1000, 1792 - headers, 1793 - headers, 3000, 4000] {
                let q = padded("checkout.shop.svc.clusterset.local", size);
                let before = received();
                let through_xdp = ask(&plain, server, &q);
                assert!(through_xdp.is_some(), "a {size}-byte query to {server}");
                assert_eq!(
                    through_xdp,
                    ask(&past, server, &q),
                    "{size} bytes to {server}"
                );
                let frame = headers + size;
                assert_eq!(
                    received() - before,
                    (frame <= 1792) as u64,
                    "{frame}-byte frame"
                );
            }
        }
    });
}

/// Sends every case through `plain` (which the XDP program on `iface` takes) and through `past`
/// (which it leaves to the sockets): the answers must be equal byte for byte, and every plain
/// datagram, and none of the others, must have gone through an AF_XDP socket.
fn same_answers_both_ways(
    cases: &[(String, Vec<u8>)],
    plain: &UdpSocket,
    past: &UdpSocket,
    server: SocketAddr,
    iface: &str,
) {
    let count = || received_by_queue(iface).iter().sum::<u64>();
    let before = count();
    let mut answered = 0;
    for (what, packet) in cases {
        let through_xdp = ask(plain, server, packet);
        let through_sockets = ask(past, server, packet);
        assert_eq!(through_xdp, through_sockets, "{what} to {server}");
        answered += through_xdp.is_some() as usize;
    }
    assert_eq!(count() - before, cases.len() as u64, "to {server}");
    assert!(answered > cases.len() * 9 / 10, "{answered} answered");
}

/// Driver-mode XDP (veth has it) on an interface with two receive queues, its clients in
/// another namespace across the veth pair, as a pod's DNS server is reached. The server must
/// find both queues (sysfs, mounted for another namespace, does not show the interface), put a
/// socket on each, and answer on each what the sockets answer.
#[test]
fn driver_mode_serves_every_receive_queue() {
    let _module = common::module(module_path!());
    in_netns(|| {
        let peer = Peer::new("xa", 2, 2);
        let (pairs, spread) = peer.run(|| {
            let pairs = [
                (socket("198.18.99.2:0"), socket_past_xdp("198.18.99.2:0")),
                (
                    socket("[fd60:d83d:ba89:99::2]:0"),
                    socket_past_xdp("[fd60:d83d:ba89:99::2]:0"),
                ),
            ];
            (
                pairs,
                (0..32).map(|_| socket("198.18.99.2:0")).collect::<Vec<_>>(),
            )
        });
        let _server = start(&["--listen", "[::]:53", "--xdp", "xa"]);
        assert_eq!(xdp_mode("xa").as_deref(), Some("xdp"), "not in driver mode");
        let cases = cases();
        for ((plain, past), server) in pairs
            .iter()
            .zip(["198.18.99.1:53", "[fd60:d83d:ba89:99::1]:53"])
        {
            same_answers_both_ways(&cases, plain, past, server.parse().unwrap(), "xa");
        }
        // Clients spread over both queues (the sending side picks a queue per socket), and
        // each queue's socket answers.
        let before = received_by_queue("xa");
        assert_eq!(before.len(), 2, "a socket for each receive queue");
        for s in &spread {
            answered(s, "198.18.99.1:53");
        }
        let after = received_by_queue("xa");
        let grew: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        assert_eq!(grew.iter().sum::<u64>(), spread.len() as u64, "{grew:?}");
        assert!(
            grew.iter().all(|&n| n > 0),
            "a queue answered nothing: {grew:?}"
        );
        // TCP passes the program untouched: 300 pipelined queries in one write (segments of a
        // full MTU into the interface), each answered.
        let answered = peer.run(|| {
            let mut t = TcpStream::connect("198.18.99.1:53").unwrap();
            t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut all = Vec::new();
            for id in 0..300u16 {
                let mut q = query("frontend.shop.svc.clusterset.local", RecordType::A, None);
                q[..2].copy_from_slice(&id.to_be_bytes());
                all.extend_from_slice(&(q.len() as u16).to_be_bytes());
                all.extend_from_slice(&q);
            }
            t.write_all(&all).unwrap();
            let mut ids = std::collections::BTreeSet::new();
            for _ in 0..300 {
                let mut len = [0u8; 2];
                t.read_exact(&mut len).unwrap();
                let mut m = vec![0; u16::from_be_bytes(len) as usize];
                t.read_exact(&mut m).unwrap();
                ids.insert(u16::from_be_bytes([m[0], m[1]]));
            }
            ids.len()
        });
        assert_eq!(answered, 300);
        assert_eq!(
            received_by_queue("xa"),
            after,
            "TCP reached the AF_XDP sockets"
        );
    });
}

/// In a container, sysfs is mounted for the container's own network namespace and lists its
/// interface's receive queues exactly. The server takes that count (veth's channel count says
/// twice as many), so each socket gets the full rings: 4 MiB a queue, 12 MiB for three, where
/// sizing for six would halve them.
#[test]
fn sysfs_of_the_own_namespace_gives_the_exact_queue_count() {
    let _module = common::module(module_path!());
    in_netns(|| {
        // SAFETY: unshare(2) and mount(2) on this thread alone, with NUL-terminated strings.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0);
            let none = std::ptr::null();
            assert_eq!(
                libc::mount(
                    none,
                    c"/".as_ptr(),
                    none,
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null()
                ),
                0
            );
            assert_eq!(
                libc::mount(
                    c"sysfs".as_ptr(),
                    c"/sys".as_ptr(),
                    c"sysfs".as_ptr(),
                    0,
                    std::ptr::null()
                ),
                0,
                "{}",
                io::Error::last_os_error()
            );
        }
        let peer = Peer::new("eth0", 3, 3);
        let s = peer.run(|| socket("198.18.99.2:0"));
        let mut cmd = Command::new(BIN);
        cmd.args(["--file", &example(), "--admin-listen", ADMIN])
            .args(["--listen", "0.0.0.0:53", "--xdp", "eth0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut server = start_with(cmd);
        answered(&s, "198.18.99.1:53");
        assert_eq!(received_by_queue("eth0").len(), 3);
        let log = server.stderr();
        let line = log
            .lines()
            .find(|l| l.contains("DNS answering UDP through AF_XDP"))
            .unwrap_or_else(|| panic!("no start-up line: {log}"));
        assert!(
            line.contains("queues=3") && line.contains("locked_mib=12"),
            "{line}"
        );
    });
}

/// A veth with fewer receive queues than its peer has send queues refuses driver mode
/// (ENOSPC). The server says why and serves in generic mode.
#[test]
fn a_driver_that_refuses_xdp_leaves_generic_mode() {
    let _module = common::module(module_path!());
    in_netns(|| {
        let peer = Peer::new("xa", 1, 2);
        let s = peer.run(|| socket("198.18.99.2:0"));
        let mut server = start(&["--listen", "0.0.0.0:53", "--xdp", "xa"]);
        assert_eq!(xdp_mode("xa").as_deref(), Some("xdpgeneric"));
        answered(&s, "198.18.99.1:53");
        assert_eq!(received_by_queue("xa"), [1]);
        let err = server.stderr();
        assert!(
            err.contains("the driver refused XDP")
                && err.contains("as many receive queues as its peer has send queues")
                && err.contains("using generic mode"),
            "{err}"
        );
    });
}

/// A link that goes down and up again (a flap, a cable, a driver reset) keeps the program and
/// the sockets: answers still come through XDP and no error is logged. An interface deleted
/// under the server (its AF_XDP sockets are unbound): the server says so,
/// `clusterset_dns_xdp_up` drops to 0, and the ordinary sockets go on answering.
#[test]
fn an_interface_that_goes_away_leaves_the_sockets_answering() {
    let _module = common::module(module_path!());
    in_netns(|| {
        let peer = Peer::new("xa", 2, 2);
        let s = peer.run(|| socket("198.18.99.2:0"));
        let mut server = start(&["--listen", "0.0.0.0:53", "--xdp", "xa"]);
        answered(&s, "198.18.99.1:53");
        let up = || {
            let (_, scrape) = http_get("/metrics").unwrap();
            (0..2)
                .map(|q| {
                    metric(
                        &scrape,
                        &format!("clusterset_dns_xdp_up{{interface=\"xa\",queue=\"{q}\"}}"),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(up(), [1, 1]);
        for side in ["here", "peer"] {
            let flap = move || {
                let iface = if side == "here" { "xa" } else { "xb" };
                ip(&["link", "set", iface, "down"]);
                ip(&["link", "set", iface, "up"]);
            };
            if side == "here" {
                flap();
            } else {
                peer.run(flap);
            }
            let received = || received_by_queue("xa").iter().sum::<u64>();
            let before = received();
            // The link takes a moment to carry frames again after coming up.
            let q = query("checkout.shop.svc.clusterset.local", RecordType::A, None);
            until(
                format!("an answer after the {side} link flapped"),
                5,
                || ask(&s, "198.18.99.1:53".parse().unwrap(), &q).is_some(),
            );
            assert!(
                received() > before,
                "answered past XDP after the {side} link flapped"
            );
            assert_eq!(xdp_mode("xa").as_deref(), Some("xdp"));
            let now = up();
            if now != [1, 1] {
                panic!(
                    "XDP down after the {side} link flapped: {now:?}\n{}",
                    server.stderr()
                );
            }
        }
        ip(&["link", "del", "xa"]);
        until(Lazy(|| format!("both queues down: {:?}", up())), 3, || {
            up() == [0, 0]
        });
        let (_, scrape) = http_get("/metrics").unwrap();
        common::promtool_check(&scrape);
        answered(&socket("127.0.0.1:0"), "127.0.0.1:53");
        let err = server.stderr();
        assert_eq!(err.matches("the interface went away").count(), 2, "{err}");
        assert!(
            !err.contains("AF_XDP socket error") && !err.contains("XDP send failed"),
            "{err}"
        );
    });
}

/// deploy/xdp's container, as the runtime would start it: uid 0 with only the capabilities
/// the manifest adds, no_new_privs (allowPrivilegeEscalation: false), a locked-memory limit
/// far below the frames, the manifest's own flags and an interface named eth0. It serves
/// through XDP in driver mode; without any one of those capabilities it refuses to start and
/// says what it lacks, and with all of them it names what else refused: a seccomp filter, or a
/// user namespace.
#[test]
fn the_xdp_manifest_grants_what_xdp_needs_and_no_more() {
    let _module = common::module(module_path!());
    let objs = common::yaml_objects(&common::kustomize("deploy/xdp"));
    let dep = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    let caps: Vec<String> = c["securityContext"]["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_lowercase())
        .collect();
    assert_eq!(c["securityContext"]["runAsUser"], 0);
    let args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert!(
        args.iter().any(|a| a == "--admin-listen=0.0.0.0:9153"),
        "{args:?}"
    );
    let port = args
        .iter()
        .find_map(|a| a.strip_prefix("--listen=0.0.0.0:"))
        .expect("--listen=0.0.0.0:PORT")
        .to_string();
    in_netns(move || {
        let peer = Peer::new("eth0", 2, 2);
        let s = peer.run(|| socket("198.18.99.2:0"));
        let bounding = |caps: &[String]| {
            let mut set = "-all".to_string();
            for c in caps {
                set.push_str(",+");
                set.push_str(c);
            }
            set
        };
        let wrapper = |set: &str| -> Vec<String> {
            [
                "prlimit",
                "--memlock=65536",
                "setpriv",
                "--bounding-set",
                set,
                "--inh-caps",
                "-all",
                "--no-new-privs",
                "--",
            ]
            .map(String::from)
            .to_vec()
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let all = bounding(&caps);
        let w = wrapper(&all);
        let w: Vec<&str> = w.iter().map(String::as_str).collect();
        {
            let _server = start_as(&w, &args);
            assert_eq!(xdp_mode("eth0").as_deref(), Some("xdp"));
            answered(&s, &format!("198.18.99.1:{port}"));
            assert_eq!(received_by_queue("eth0").iter().sum::<u64>(), 1);
            // Both queues, whatever the host's own eth0 (which sysfs, mounted for the host's
            // namespace, shows under the same name) has.
            assert_eq!(received_by_queue("eth0").len(), 2);
        }
        for left_out in &caps {
            let fewer: Vec<String> = caps.iter().filter(|c| *c != left_out).cloned().collect();
            let set = bounding(&fewer);
            let w = wrapper(&set);
            let w: Vec<&str> = w.iter().map(String::as_str).collect();
            let err = fails_as(&w, &args);
            assert!(
                err.contains("cannot serve UDP through XDP on eth0"),
                "without {left_out}: {err}"
            );
            let hint = if left_out == "ipc_lock" {
                "RLIMIT_MEMLOCK or grant CAP_IPC_LOCK".to_string()
            } else {
                format!(
                    "(lacks CAP_{}: needs CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW",
                    left_out.to_uppercase()
                )
            };
            assert!(err.contains(&hint), "without {left_out}: {err}");
        }
        // All four, under a runtime whose default seccomp profile allows bpf(2) only with
        // CAP_SYS_ADMIN (CRI-O's and Podman's): the filter, not a capability, is named.
        let mut cmd = command(&w, &args);
        refuse_bpf(&mut cmd);
        let err = fails_with(cmd);
        assert!(
            err.contains("creating the socket map: Operation not permitted"),
            "{err}"
        );
        assert!(
            err.contains("holds CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW, so its seccomp filter is the likely refuser"),
            "{err}"
        );
        // Root in a user namespace of its own (a pod with hostUsers: false) holds every
        // capability there, and none reaches bpf(2): the namespace is named.
        let err = fails_as(&["unshare", "--user", "--map-root-user"], &args);
        assert!(
            err.contains("creating the socket map: Operation not permitted"),
            "{err}"
        );
        assert!(err.contains("but in a user namespace"), "{err}");
    });
}

fn ip(args: &[&str]) {
    common::run_ok(Command::new("ip").args(args));
}

/// How an XDP program is attached to `iface`, as `ip link` says it: "xdp" (driver mode),
/// "xdpgeneric", "xdpoffload"; `None` without one.
fn xdp_mode(iface: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["link", "show", iface])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|w| w.starts_with("xdp"))
        .map(str::to_string)
}

/// An A query of `size` bytes: EDNS with a padding option (RFC 7830) filling it out.
fn padded(name: &str, size: usize) -> Vec<u8> {
    let mut q = query(name, RecordType::A, Some(1232));
    let pad = size - q.len() - 4;
    let n = q.len();
    q[n - 2..].copy_from_slice(&((4 + pad) as u16).to_be_bytes());
    q.extend_from_slice(&[0, 12]);
    q.extend_from_slice(&(pad as u16).to_be_bytes());
    q.resize(size, 0);
    q
}

/// A UDP datagram as raw IPv4 payload (the kernel adds the IP header): the UDP header with
/// `check` as given, then `message`.
fn raw_udp(sport: u16, dport: u16, check: Option<u16>, message: &[u8]) -> Vec<u8> {
    let len = (8 + message.len()) as u16;
    let mut d = Vec::new();
    d.extend_from_slice(&sport.to_be_bytes());
    d.extend_from_slice(&dport.to_be_bytes());
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(message);
    let check = check.unwrap_or_else(|| {
        // RFC 768 over the pseudo-header 127.0.0.1 → 127.0.0.1.
        let mut all = vec![127, 0, 0, 1, 127, 0, 0, 1, 0, 17];
        all.extend_from_slice(&len.to_be_bytes());
        all.extend_from_slice(&d);
        if all.len() % 2 == 1 {
            all.push(0);
        }
        let mut s: u32 = all
            .chunks(2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]) as u32)
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    });
    d[6..8].copy_from_slice(&check.to_be_bytes());
    d
}

#[test]
fn frames_the_kernel_would_drop_get_no_answer_and_are_counted() {
    let _module = common::module(module_path!());
    in_netns(|| {
        allow_xdp_answers_on_lo();
        // (Also the path that waits after small batches.)
        let _server = start(&[
            "--listen",
            "127.0.0.1:53",
            "--xdp",
            "lo",
            "--xdp-coalesce",
            "100us",
        ]);
        // SAFETY: a raw IPv4 socket carrying UDP; the kernel writes the IP header.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) };
        assert!(raw >= 0, "{}", io::Error::last_os_error());
        let send = |datagram: &[u8]| {
            let to = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a buffer and a sockaddr_in of the lengths passed.
            let r = unsafe {
                libc::sendto(
                    raw,
                    datagram.as_ptr().cast(),
                    datagram.len(),
                    0,
                    (&to as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            };
            assert_eq!(r as usize, datagram.len());
        };
        let client = socket("127.0.0.1:0");
        let port = client.local_addr().unwrap().port();
        let q = query("checkout.shop.svc.clusterset.local", RecordType::A, None);
        let dropped = |reason: &str| {
            let (_, scrape) = http_get("/metrics").unwrap();
            metric(
                &scrape,
                &format!(
                    "clusterset_dns_xdp_dropped_total{{interface=\"lo\",queue=\"0\",reason=\"{reason}\"}}"
                ),
            )
        };
        let mut buf = [0u8; 1500];
        // The same datagram with its right checksum is answered: the raw path itself works.
        send(&raw_udp(port, 53, None, &q));
        let n = client
            .recv(&mut buf)
            .expect("an answer to a valid datagram");
        assert_eq!(buf[..2], q[..2]);
        assert!(n > q.len());
        let wrong = raw_udp(port, 53, None, &q);
        let check = u16::from_be_bytes([wrong[6], wrong[7]]) ^ 0x0101;
        send(&raw_udp(port, 53, Some(check), &q));
        assert!(
            client.recv(&mut buf).is_err(),
            "a bad checksum got an answer"
        );
        assert_eq!(dropped("checksum"), 1);
        // No checksum at all is valid over IPv4.
        send(&raw_udp(port, 53, Some(0), &q));
        assert!(
            client.recv(&mut buf).is_ok(),
            "no answer without a checksum"
        );
        // Source port 0 cannot be answered.
        send(&raw_udp(0, 53, None, &q));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(dropped("source"), 1);
        // A UDP length beyond the datagram.
        let mut long = raw_udp(port, 53, Some(0), &q);
        long[4..6].copy_from_slice(&(q.len() as u16 + 100).to_be_bytes());
        send(&long);
        assert!(client.recv(&mut buf).is_err(), "a bad length got an answer");
        assert_eq!(dropped("length"), 1);
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(raw) };
        // The kernel's own counts are there too, and the whole scrape passes promtool's lint.
        let (_, scrape) = http_get("/metrics").unwrap();
        assert!(
            scrape.contains("clusterset_dns_xdp_kernel_dropped_total{interface=\"lo\",queue=\"0\",reason=\"rx_ring_full\"} 0"),
            "{scrape}"
        );
        common::promtool_check(&scrape);
    });
}

#[test]
fn start_up_errors_name_the_fix_and_the_program_goes_with_the_process() {
    let _module = common::module(module_path!());
    in_netns(|| {
        // IPv4 on lo without the two settings: refused, naming them.
        let err = fails(&["--listen", "127.0.0.1:53", "--xdp", "lo"]);
        assert!(
            err.contains("net.ipv4.conf.lo.accept_local=1")
                && err.contains("net.ipv4.conf.lo.route_localnet=1"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(xdp_mode("lo").is_none());
        let err = fails(&["--xdp", "lo", "--xdp-coalesce", "5ms"]);
        assert!(err.contains("more than 1ms"), "{err}");
        let err = fails(&["--listen", "127.0.0.1:53", "--xdp", "nosuch0"]);
        assert!(
            err.contains("nosuch0") && err.contains("no such interface"),
            "{err}"
        );
        // IPv6 alone needs neither setting.
        let server = start(&["--listen", "[::1]:53", "--xdp", "lo"]);
        assert!(xdp_mode("lo").is_some());
        let s = socket("[::1]:0");
        let q = query("frontend.shop.svc.clusterset.local", RecordType::AAAA, None);
        let answer = ask(&s, "[::1]:53".parse().unwrap(), &q).expect("an answer over ::1");
        assert_eq!(u16::from_be_bytes([answer[6], answer[7]]), 1, "one AAAA");
        assert_eq!(received(), 1);
        // One program per interface: a second server says so.
        allow_xdp_answers_on_lo();
        let err = fails(&["--listen", "127.0.0.1:54", "--xdp", "lo"]);
        assert!(err.contains("has an XDP program already"), "{err}");
        // Killed outright, the server takes its program with it.
        drop(server);
        until("the XDP program to go with the server", 5, || {
            xdp_mode("lo").is_none()
        });
        let _again = start(&["--listen", "127.0.0.1:53", "--xdp", "lo"]);
    });
}
