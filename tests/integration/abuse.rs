//! Abuse: malformed packets of every shape over UDP and TCP while normal queries go on, TCP
//! frames of zero and 64 KiB, a thousand idle and trickling TCP connections (slowloris) that
//! must not stop UDP or new TCP clients, and no amplification through ANY.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Proto, exchange, exchange_raw, malformed, query, start_with};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OBJECTS: &str = "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: ClusterSetIP, ips: [10.0.0.1, fd00::1], ports: [{name: http, port: 80}, {name: https, port: 443}]}\n";
const WEB: &str = "web.shop.svc.clusterset.local";

async fn expect(
    server: SocketAddr,
    proto: Proto,
    what: &str,
    packet: &[u8],
    rcode: Option<ResponseCode>,
) {
    let raw = exchange_raw(server, proto, packet, Duration::from_millis(700)).await;
    match (rcode, raw) {
        (None, None) => {}
        (None, Some(r)) => panic!("{what} over {proto:?}: answered {r:?}, should be dropped"),
        (Some(_), None) => panic!("{what} over {proto:?}: no answer"),
        (Some(rc), Some(raw)) => {
            let m = Message::from_vec(&raw).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                u16::from(m.metadata.response_code),
                u16::from(rc),
                "{what} over {proto:?}"
            );
            assert_eq!(
                m.metadata.id,
                u16::from_be_bytes([packet[0], packet[1]]),
                "{what}"
            );
            assert!(m.answers.is_empty(), "{what}: {m:?}");
        }
    }
}

async fn web_answers(server: SocketAddr, proto: Proto) -> bool {
    let q = query(WEB, RecordType::A, None);
    match exchange_raw(server, proto, &q, Duration::from_secs(1)).await {
        Some(raw) => Message::from_vec(&raw).is_ok_and(|m| m.answers.len() == 1),
        None => false,
    }
}

#[tokio::test]
async fn malformed_packets_get_the_right_answer_while_serving_goes_on() {
    let _module = common::module(module_path!());
    let s = start_with(OBJECTS, |_| {}).await;
    let cases = malformed(WEB);
    // Normal queries keep being answered while the malformed ones arrive (bounded: 20 rounds).
    let dns = s.dns;
    let normal = tokio::spawn(async move {
        let mut answered = 0;
        for _ in 0..200 {
            assert!(
                web_answers(dns, Proto::Udp).await,
                "a normal query went unanswered"
            );
            answered += 1;
        }
        answered
    });
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for round in 0..20 {
        for (what, packet, rcode) in &cases {
            if round > 0 && rcode.is_none() {
                // Checked once to get no answer; after that only sent (waiting is slow).
                sock.send_to(packet, s.dns).await.unwrap();
                continue;
            }
            expect(s.dns, Proto::Udp, what, packet, *rcode).await;
        }
    }
    for (what, packet, rcode) in &cases {
        expect(s.dns, Proto::Tcp, what, packet, *rcode).await;
    }
    assert_eq!(normal.await.unwrap(), 200);
    assert!(web_answers(s.dns, Proto::Udp).await && web_answers(s.dns, Proto::Tcp).await);
}

/// The UDP workers answer what one receive brings as a batch: a burst mixing queries that get
/// answers with ones that get none must give each query the very answer it gets alone.
#[tokio::test]
async fn a_burst_of_mixed_datagrams_gets_each_the_answer_it_gets_alone() {
    let _module = common::module(module_path!());
    let s = start_with(OBJECTS, |_| {}).await;
    let mut packets: Vec<(Vec<u8>, Option<ResponseCode>)> = malformed(WEB)
        .into_iter()
        .map(|(_, p, rcode)| (p, rcode))
        .collect();
    for name in [
        WEB,
        "_https._tcp.web.shop.svc.clusterset.local",
        "nope.shop.svc.clusterset.local",
        "web.example.org",
    ] {
        for t in [
            RecordType::A,
            RecordType::AAAA,
            RecordType::SRV,
            RecordType::TXT,
        ] {
            for edns in [None, Some(1232)] {
                packets.push((query(name, t, edns), Some(ResponseCode::NoError)));
            }
        }
    }
    // Each its own ID, so answers can be told apart (runts too short for one get no answer).
    for (i, (p, _)) in packets.iter_mut().enumerate() {
        if p.len() >= 2 {
            p[..2].copy_from_slice(&(1000 + i as u16).to_be_bytes());
        }
    }
    let mut alone = std::collections::HashMap::new();
    for (p, rcode) in &packets {
        if rcode.is_some() {
            let answer = exchange_raw(s.dns, Proto::Udp, p, Duration::from_secs(2)).await;
            let answer = answer.expect("an answer to a query sent alone");
            alone.insert(u16::from_be_bytes([p[0], p[1]]), answer);
        }
    }
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut buf = vec![0u8; 65535];
    for round in 0..3 {
        for (p, _) in &packets {
            sock.send_to(p, s.dns).await.unwrap();
        }
        let mut got = std::collections::HashMap::new();
        // Until every expected answer is in, then a little longer for any that should not be.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut extra = Duration::from_millis(300);
        while Instant::now() < deadline {
            let wait = if got.len() == alone.len() {
                extra
            } else {
                Duration::from_secs(1)
            };
            let Ok(n) = tokio::time::timeout(wait, sock.recv(&mut buf)).await else {
                if got.len() == alone.len() {
                    break;
                }
                continue;
            };
            let answer = buf[..n.unwrap()].to_vec();
            assert!(
                answer.len() >= 12,
                "round {round}: a {}-byte answer",
                answer.len()
            );
            let id = u16::from_be_bytes([answer[0], answer[1]]);
            assert!(
                got.insert(id, answer).is_none(),
                "round {round}: ID {id} answered twice"
            );
            extra = Duration::from_millis(300);
        }
        assert_eq!(
            got.len(),
            alone.len(),
            "round {round}: answers to a burst of {}",
            packets.len()
        );
        for (id, answer) in &got {
            assert_eq!(Some(answer), alone.get(id), "round {round}: ID {id}");
        }
    }
}

/// Everything the server sends on one connection to `bytes` (framed queries), then the client's
/// goodbye (a zero-length frame), until it closes; `split` says how to cut the writes: a
/// piece's length and whether to pause after it.
async fn tcp_conversation(
    server: SocketAddr,
    bytes: &[u8],
    split: &dyn Fn(usize) -> (usize, bool),
) -> Vec<u8> {
    let c = tokio::net::TcpStream::connect(server).await.unwrap();
    c.set_nodelay(true).unwrap();
    let (mut r, mut w) = c.into_split();
    let write = async {
        let (mut at, mut i) = (0, 0);
        while at < bytes.len() {
            let (len, pause) = split(i);
            let end = bytes.len().min(at.saturating_add(len));
            w.write_all(&bytes[at..end]).await.unwrap();
            (at, i) = (end, i + 1);
            if pause {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        w.write_all(&[0, 0]).await.unwrap();
    };
    let read = async {
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        got
    };
    let both = async { tokio::join!(write, read).1 };
    tokio::time::timeout(Duration::from_secs(20), both)
        .await
        .expect("the server answered and closed within 20 s")
}

fn framed(p: &[u8]) -> Vec<u8> {
    let mut f = (p.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(p);
    f
}

/// A TCP client pipelining queries gets them answered in batches (what one read brings): each
/// query, whatever else shares its batch, must get the very answer it gets alone, in the order
/// asked, however the bytes are split across reads, with a 60 KB frame among small ones (more
/// than the connection's starting buffer holds), and counted once each. The same from a client
/// allowed zone transfers, whose AXFRs are answered with the whole zone in the same stream.
#[tokio::test]
async fn a_tcp_pipeline_of_mixed_queries_gets_each_the_answer_it_gets_alone_in_order() {
    let _module = common::module(module_path!());
    let mut packets: Vec<Vec<u8>> = malformed(WEB)
        .into_iter()
        // A zero-length frame would end the connection.
        .filter(|(_, p, _)| !p.is_empty())
        .map(|(_, p, _)| p)
        .collect();
    let mut padded = query(WEB, RecordType::A, None);
    padded[11] = 1;
    padded.resize(60_000, 0xAB);
    packets.insert(packets.len() / 2, padded);
    for name in [
        WEB,
        "_https._tcp.web.shop.svc.clusterset.local",
        "nope.shop.svc.clusterset.local",
        "clusterset.local",
        "web.example.org",
    ] {
        for t in [
            RecordType::A,
            RecordType::AAAA,
            RecordType::SRV,
            RecordType::NS,
            RecordType::AXFR,
        ] {
            for edns in [None, Some(512), Some(1232)] {
                packets.push(query(name, t, edns));
            }
        }
    }
    // Well over one batch (32) of queries, each its own ID.
    assert!(packets.len() >= 100, "{} packets", packets.len());
    for (i, p) in packets.iter_mut().enumerate() {
        if p.len() >= 2 {
            p[..2].copy_from_slice(&(2000 + i as u16).to_be_bytes());
        }
    }
    let stream: Vec<u8> = packets.iter().flat_map(|p| framed(p)).collect();
    let allowed: clusterset_dns::cidr::Cidr = "127.0.0.1/32".parse().unwrap();
    let mut refused_len = 0;
    for may_transfer in [false, true] {
        let s = start_with(OBJECTS, |c| {
            if may_transfer {
                c.server.tcp.allow_transfer = vec![allowed];
            }
        })
        .await;
        let series = format!(
            r#"coredns_dns_requests_total{{server="dns://{}",zone="clusterset.local.",view="",proto="tcp",family="1",type="A"}}"#,
            s.dns
        );
        let tcp_requests = || common::metric(s.admin, &series);
        let whole = |_| (usize::MAX, false);
        let at_start = tcp_requests().await;
        let mut alone = Vec::new();
        let mut answered = 0;
        for p in &packets {
            let a = tcp_conversation(s.dns, &framed(p), &whole).await;
            answered += !a.is_empty() as usize;
            alone.extend_from_slice(&a);
        }
        assert!(answered > 80, "{answered} of {} answered", packets.len());
        // The allowed client's AXFRs of the apex (3 of them) bring the whole zone each.
        if may_transfer {
            assert!(alone.len() > refused_len + 3 * 200, "{} bytes", alone.len());
        } else {
            refused_len = alone.len();
        }
        let before = tcp_requests().await;
        let alone_a = before - at_start;
        // All in one write; in 7-byte pieces (frames and even lengths split across reads); in
        // pieces of every size from 1 to 4,099 bytes with pauses between some, so reads end
        // anywhere.
        let splits: [&dyn Fn(usize) -> (usize, bool); 3] = [&whole, &|_| (7, false), &|i| {
            ((i * 997) % 4099 + 1, i % 5 == 0)
        }];
        for (round, split) in splits.iter().enumerate() {
            let got = tcp_conversation(s.dns, &stream, split).await;
            assert!(
                got == alone,
                "transfers allowed {may_transfer}, round {round}: {} bytes answered, {} alone; \
                 first difference at byte {:?}",
                got.len(),
                alone.len(),
                got.iter().zip(&alone).position(|(a, b)| a != b)
            );
        }
        // Counted as often as when each query came alone.
        assert!(alone_a > 0.0);
        assert!(
            common::eventually(5, || async {
                tcp_requests().await - before == 3.0 * alone_a
            })
            .await,
            "TCP A requests counted: {} more, want 3 × {alone_a}",
            tcp_requests().await - before
        );
    }
}

#[tokio::test]
async fn zero_and_64k_tcp_frames() {
    let _module = common::module(module_path!());
    let s = start_with(OBJECTS, |_| {}).await;
    // A zero-length frame ends the connection.
    let mut c = tokio::net::TcpStream::connect(s.dns).await.unwrap();
    c.write_all(&[0, 0]).await.unwrap();
    let mut buf = [0u8; 2];
    let n = tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "closed after a zero-length frame");
    // A 65,535-byte frame: a valid query padded with junk additional bytes is FORMERR (its
    // counts do not cover them), and the connection goes on serving.
    let mut big = query(WEB, RecordType::A, None);
    big[11] = 1;
    big.resize(65_535, 0xAB);
    let mut c = tokio::net::TcpStream::connect(s.dns).await.unwrap();
    let mut framed = (big.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&big);
    c.write_all(&framed).await.unwrap();
    c.read_exact(&mut buf).await.unwrap();
    let mut answer = vec![0u8; u16::from_be_bytes(buf) as usize];
    c.read_exact(&mut answer).await.unwrap();
    let m = Message::from_vec(&answer).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    let q = query(WEB, RecordType::A, None);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    c.write_all(&framed).await.unwrap();
    c.read_exact(&mut buf).await.unwrap();
    let mut answer = vec![0u8; u16::from_be_bytes(buf) as usize];
    c.read_exact(&mut answer).await.unwrap();
    assert_eq!(Message::from_vec(&answer).unwrap().answers.len(), 1);
    assert!(web_answers(s.dns, Proto::Udp).await);
}

#[tokio::test]
async fn any_is_never_an_amplifier() {
    let _module = common::module(module_path!());
    let s = start_with(OBJECTS, |_| {}).await;
    for name in [
        WEB,
        "_http._tcp.web.shop.svc.clusterset.local",
        "clusterset.local",
        "shop.svc.clusterset.local",
    ] {
        let q = query(name, RecordType::ANY, Some(4096));
        for proto in [Proto::Udp, Proto::Tcp] {
            let m = exchange(s.dns, proto, &q).await;
            assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
            let types: std::collections::BTreeSet<RecordType> =
                m.answers.iter().map(|r| r.record_type()).collect();
            assert!(
                types.len() <= 1,
                "ANY {name} gave {types:?} (RFC 8482: one RRset at most)"
            );
            assert!(!m.metadata.recursion_available);
        }
    }
    // Outside the zone: REFUSED, nothing else.
    let m = exchange(
        s.dns,
        Proto::Udp,
        &query("example.com", RecordType::ANY, None),
    )
    .await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(m.answers.is_empty() && m.authorities.is_empty());
}

/// Raises the open-file limit to its hard limit: the test holds a thousand sockets, and so
/// does the in-process server.
fn more_files() {
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_does_not_stop_udp_or_new_tcp_clients() {
    let _module = common::module(module_path!());
    more_files();
    let s = start_with(OBJECTS, |c| {
        c.server.tcp.idle_timeout = Duration::from_secs(3);
        c.server.tcp.max_connections = 100;
    })
    .await;
    // 500 idle connections and 500 that trickle a query one byte at a time, never finishing.
    let mut idle = Vec::new();
    for _ in 0..500 {
        idle.push(tokio::net::TcpStream::connect(s.dns).await.unwrap());
    }
    let dns = s.dns;
    let tricklers = tokio::spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..500 {
            if let Ok(c) = tokio::net::TcpStream::connect(dns).await {
                conns.push(c);
            }
        }
        // Two bytes of length, then one byte every 200 ms, for at most 5 s.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut sent = 0u64;
        while Instant::now() < deadline {
            for c in &mut conns {
                if c.write_all(&[0]).await.is_ok() {
                    sent += 1;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        sent
    });
    // Meanwhile: every UDP query is answered, and every new TCP client is served.
    let started = Instant::now();
    let (mut udp_ok, mut tcp_ok) = (0, 0);
    while started.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        assert!(
            web_answers(s.dns, Proto::Udp).await,
            "UDP query unanswered under slowloris"
        );
        assert!(t.elapsed() < Duration::from_secs(1));
        udp_ok += 1;
        let t = Instant::now();
        assert!(
            web_answers(s.dns, Proto::Tcp).await,
            "new TCP client not served under slowloris"
        );
        assert!(t.elapsed() < Duration::from_secs(1));
        tcp_ok += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(udp_ok >= 20 && tcp_ok >= 20, "{udp_ok} UDP, {tcp_ok} TCP");
    tricklers.await.unwrap();
    // The cap held: at most 100 open, and the crowd was evicted or timed out.
    let open = common::metric(s.admin, "clusterset_dns_tcp_connections").await;
    assert!(open <= 100.0, "{open} connections open over a cap of 100");
    let evicted = common::metric(s.admin, "clusterset_dns_tcp_connections_evicted_total").await;
    assert!(evicted >= 900.0, "only {evicted} evicted");
    // Every idle connection was closed by the server.
    let mut buf = [0u8; 1];
    for c in &mut idle {
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("the server closes idle connections")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
}
