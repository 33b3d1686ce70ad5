//! Protocol behaviour: EDNS, error codes, dropped packets, truncation and TCP retry, TCP framing,
//! idle timeout and connection cap, several zones, name server glue.

use crate::common;

use std::time::Duration;

use common::{Proto, exchange, exchange_raw, query, start, start_with};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ONE: &str = "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: ClusterSetIP, ips: [10.0.0.1], ports: [{name: http, port: 80}]}\n";

/// A headless service `name.big` with `n` endpoints in cluster east.
fn headless(name: &str, n: usize) -> String {
    let mut y = format!(
        "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: big}}\nspec: {{type: Headless, ports: [{{name: http, port: 80}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}-east, namespace: big, labels: {{multicluster.kubernetes.io/service-name: {name}, multicluster.kubernetes.io/source-cluster: east}}}}\n\
         addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints:\n"
    );
    for i in 0..n {
        y += &format!(
            "- {{addresses: [10.5.{}.{}], hostname: pod-{i}}}\n",
            i / 250,
            i % 250 + 1
        );
    }
    y
}

#[tokio::test]
async fn edns_is_echoed_only_when_asked_and_do_is_copied() {
    let _module = common::module(module_path!());
    let s = start(ONE).await;
    for proto in [Proto::Udp, Proto::Tcp] {
        let r = exchange(
            s.dns,
            proto,
            &query("web.shop.svc.clusterset.local", RecordType::A, None),
        )
        .await;
        assert!(r.edns.is_none(), "no OPT without one in the query");
        assert_eq!(r.answers.len(), 1);
        let mut q = query("web.shop.svc.clusterset.local", RecordType::A, Some(4096));
        let n = q.len();
        q[n - 4] = 0x80; // DO: high bit of the OPT flags
        let r = exchange(s.dns, proto, &q).await;
        let edns = r.edns.expect("OPT echoed");
        assert_eq!(edns.max_payload(), 1232);
        assert_eq!(edns.version(), 0);
        assert!(edns.flags().dnssec_ok, "DO copied (RFC 3225)");
    }
}

#[tokio::test]
async fn error_codes() {
    let _module = common::module(module_path!());
    let s = start(ONE).await;
    let base = query("web.shop.svc.clusterset.local", RecordType::A, Some(1232));
    let n = base.len();
    let mut badvers = base.clone();
    badvers[n - 5] = 1; // EDNS version 1
    // Other opcodes with RD and CD set: NOTIMP clears both (ISC's compliance tester checks
    // opcode 15 so).
    let mut notify = base.clone();
    notify[2] = 4 << 3 | 0x01; // opcode NOTIFY, RD
    notify[3] |= 0x10; // CD
    let mut update = base.clone();
    update[2] = 5 << 3 | 0x01;
    update[3] |= 0x10;
    let mut opcode15 = base.clone();
    opcode15[2] = 15 << 3 | 0x01;
    opcode15[3] |= 0x10;
    let mut chaos = query("web.shop.svc.clusterset.local", RecordType::A, None);
    let c = chaos.len();
    chaos[c - 1] = 3; // class CH
    let mut two = query("web.shop.svc.clusterset.local", RecordType::A, None);
    two[5] = 2; // QDCOUNT 2, second question missing
    let mut none = query("web.shop.svc.clusterset.local", RecordType::A, None);
    none[5] = 0;
    let mut lying = base.clone();
    lying[11] = 3; // ARCOUNT 3, only one there
    let mut opt_in_answer = base.clone();
    opt_in_answer[7] = 1;
    opt_in_answer[11] = 0;
    let mut two_opts = base.clone();
    two_opts.extend_from_slice(&base[n - 11..]);
    two_opts[11] = 2;
    let mut pointer = base[..12].to_vec();
    pointer.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
    let mut long_label = base[..12].to_vec();
    long_label.push(64);
    long_label.extend_from_slice(&[b'a'; 64]);
    long_label.extend_from_slice(&[0, 0, 1, 0, 1]);
    let mut long_name = base[..12].to_vec();
    for _ in 0..5 {
        long_name.push(63);
        long_name.extend_from_slice(&[b'a'; 63]);
    }
    long_name.extend_from_slice(&[0, 0, 1, 0, 1]);
    let mut axfr = query("clusterset.local", RecordType::AXFR, None);
    // The last column: whether the question can be read (and is in the zone), so the answer
    // counts under the zone; else under "dropped".
    let cases: Vec<(&str, Vec<u8>, ResponseCode, bool)> = vec![
        ("EDNS version 1", badvers, ResponseCode::BADVERS, true),
        ("opcode NOTIFY", notify, ResponseCode::NotImp, true),
        ("opcode UPDATE", update, ResponseCode::NotImp, true),
        ("opcode 15", opcode15, ResponseCode::NotImp, true),
        ("class CH", chaos, ResponseCode::FormErr, true),
        ("QDCOUNT 2", two, ResponseCode::FormErr, false),
        ("QDCOUNT 0", none, ResponseCode::FormErr, false),
        ("ARCOUNT lies", lying, ResponseCode::FormErr, true),
        (
            "OPT in the answer section",
            opt_in_answer,
            ResponseCode::FormErr,
            true,
        ),
        ("two OPTs", two_opts, ResponseCode::FormErr, true),
        (
            "pointer in the question",
            pointer,
            ResponseCode::FormErr,
            false,
        ),
        ("label over 63", long_label, ResponseCode::FormErr, false),
        ("name over 255", long_name, ResponseCode::FormErr, false),
        (
            "AXFR",
            std::mem::take(&mut axfr),
            ResponseCode::Refused,
            true,
        ),
    ];
    let mut want = std::collections::BTreeMap::new();
    for (_, _, rcode, in_zone) in &cases {
        let zone = if *in_zone {
            "clusterset.local."
        } else {
            "dropped"
        };
        *want.entry((zone, u16::from(*rcode))).or_insert(0.0) += 2.0;
    }
    for (what, packet, rcode, _) in cases {
        for proto in [Proto::Udp, Proto::Tcp] {
            let raw = exchange_raw(s.dns, proto, &packet, Duration::from_secs(2))
                .await
                .unwrap_or_else(|| panic!("{what}: no answer"));
            let m = Message::from_vec(&raw).unwrap_or_else(|e| panic!("{what}: {e}"));
            // By number: hickory reads 16 as BADSIG, which shares BADVERS's code.
            assert_eq!(
                u16::from(m.metadata.response_code),
                u16::from(rcode),
                "{what} over {proto:?}"
            );
            assert_eq!(
                m.metadata.id,
                u16::from_be_bytes([packet[0], packet[1]]),
                "{what}"
            );
            assert!(
                !m.metadata.authoritative && m.answers.is_empty(),
                "{what}: {m:?}"
            );
            // Only the ID, opcode and QR carry over to NOTIMP; a QUERY's RD and CD are echoed.
            let other_opcode = rcode == ResponseCode::NotImp;
            assert_eq!(
                (m.metadata.recursion_desired, m.metadata.checking_disabled),
                (
                    !other_opcode && packet[2] & 0x01 != 0,
                    !other_opcode && packet[3] & 0x10 != 0
                ),
                "{what}: RD and CD"
            );
        }
    }
    // Counted under the zone their question is in, as CoreDNS counts them.
    let (_, body) = common::http_get(s.admin, "/metrics").await.unwrap();
    for ((zone, rcode), n) in want {
        let label = [
            (1, "FORMERR"),
            (4, "NOTIMP"),
            (5, "REFUSED"),
            (16, "BADVERS"),
        ]
        .iter()
        .find(|(c, _)| *c == rcode)
        .unwrap()
        .1;
        let series = format!(
            "coredns_dns_responses_total{{server=\"dns://{}\",zone=\"{zone}\",view=\"\",rcode=\"{label}\",plugin=\"\"}}",
            s.dns
        );
        assert_eq!(common::metric_in(&body, &series), n, "{series}");
    }
}

#[tokio::test]
async fn responses_and_runts_are_dropped_and_serving_goes_on() {
    let _module = common::module(module_path!());
    let s = start(ONE).await;
    let mut response = query("web.shop.svc.clusterset.local", RecordType::A, None);
    response[2] |= 0x80;
    for (what, packet) in [
        ("a response", response),
        ("11 bytes", vec![0u8; 11]),
        ("nothing", vec![]),
    ] {
        if packet.is_empty() {
            continue; // an empty datagram; sent below over UDP only
        }
        for proto in [Proto::Udp, Proto::Tcp] {
            assert!(
                exchange_raw(s.dns, proto, &packet, Duration::from_millis(300))
                    .await
                    .is_none(),
                "{what} over {proto:?} was answered"
            );
        }
    }
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&[], s.dns).await.unwrap();
    for proto in [Proto::Udp, Proto::Tcp] {
        let r = exchange(
            s.dns,
            proto,
            &query("web.shop.svc.clusterset.local", RecordType::A, None),
        )
        .await;
        assert_eq!(r.answers.len(), 1);
    }
}

#[tokio::test]
async fn large_answers_truncate_over_udp_and_come_whole_over_tcp() {
    let _module = common::module(module_path!());
    let s = start(&(ONE.to_string() + &headless("many", 100) + &headless("seven", 7))).await;
    let name = "many.big.svc.clusterset.local";
    let whole = exchange(s.dns, Proto::Tcp, &query(name, RecordType::A, None)).await;
    assert!(!whole.metadata.truncation);
    assert_eq!(whole.answers.len(), 100);
    // Over UDP: TC, with as many whole A records as fit (16 octets each, the owner a pointer to
    // the question), so a stub that never retries over TCP still gets addresses.
    let question = 4 + name.len() + 2;
    for (edns, limit, opt) in [
        (None, 512, 0),
        (Some(512), 512, 11),
        (Some(1232), 1232, 11),
        (Some(4096), 1232, 11),
    ] {
        let packet = query(name, RecordType::A, edns);
        let bytes = exchange_raw(s.dns, Proto::Udp, &packet, Duration::from_secs(2))
            .await
            .expect("a UDP answer");
        let r = Message::from_vec(&bytes).unwrap();
        assert!(
            r.metadata.truncation,
            "100 A records over UDP with {edns:?}"
        );
        assert!(r.metadata.authoritative);
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        assert_eq!(r.edns.is_some(), edns.is_some());
        let fit = (limit - 12 - question - opt) / 16;
        assert_eq!(r.answers.len(), fit, "{edns:?}");
        assert!(bytes.len() <= limit, "{} octets for {limit}", bytes.len());
        assert_eq!(
            r.answers[..],
            whole.answers[..fit],
            "the first records of the whole answer, with {edns:?}"
        );
        assert!(r.additionals.is_empty());
    }
    let r = exchange(s.dns, Proto::Tcp, &query(name, RecordType::SRV, Some(1232))).await;
    assert_eq!((r.answers.len(), r.additionals.len()), (100, 100));
    let RData::SRV(srv) = &r.answers[0].data else {
        panic!()
    };
    assert_eq!(srv.weight, 1, "floor(100/100)");
    // SRV records (targets written in full) are cut at a record boundary too.
    let srv_whole = r;
    for edns in [None, Some(1232)] {
        let packet = query(name, RecordType::SRV, edns);
        let bytes = exchange_raw(s.dns, Proto::Udp, &packet, Duration::from_secs(2))
            .await
            .expect("a UDP answer");
        let r = Message::from_vec(&bytes).unwrap();
        assert!(r.metadata.truncation);
        let n = r.answers.len();
        assert!(n > 0 && bytes.len() <= 512.max(edns.unwrap_or(0) as usize));
        assert_eq!(r.answers[..], srv_whole.answers[..n], "{edns:?}");
        assert!(r.additionals.is_empty());
    }

    // Seven SRV records fit in 512 bytes, their glue does not: glue is left out, without TC.
    let r = exchange(
        s.dns,
        Proto::Udp,
        &query("seven.big.svc.clusterset.local", RecordType::SRV, None),
    )
    .await;
    assert!(!r.metadata.truncation);
    assert_eq!((r.answers.len(), r.additionals.len()), (7, 0));
    let r = exchange(
        s.dns,
        Proto::Udp,
        &query(
            "seven.big.svc.clusterset.local",
            RecordType::SRV,
            Some(1232),
        ),
    )
    .await;
    assert_eq!((r.answers.len(), r.additionals.len()), (7, 7));
    let RData::SRV(srv) = &r.answers[0].data else {
        panic!()
    };
    assert_eq!(srv.weight, 14, "floor(100/7)");
}

#[tokio::test]
async fn tcp_carries_several_queries_per_connection_in_order() {
    let _module = common::module(module_path!());
    let s = start(ONE).await;
    let mut c = tokio::net::TcpStream::connect(s.dns).await.unwrap();
    let qs: Vec<Vec<u8>> = [
        "web.shop.svc.clusterset.local",
        "nope.shop.svc.clusterset.local",
        "shop.svc.clusterset.local",
    ]
    .iter()
    .map(|n| query(n, RecordType::A, None))
    .collect();
    let mut all = Vec::new();
    for q in &qs {
        all.extend_from_slice(&(q.len() as u16).to_be_bytes());
        all.extend_from_slice(q);
    }
    c.write_all(&all).await.unwrap();
    let want = [
        ResponseCode::NoError,
        ResponseCode::NXDomain,
        ResponseCode::NoError,
    ];
    for (q, rcode) in qs.iter().zip(want) {
        let buf = common::read_framed(&mut c).await.unwrap();
        let m = Message::from_vec(&buf).unwrap();
        assert_eq!(m.metadata.id, u16::from_be_bytes([q[0], q[1]]));
        assert_eq!(m.metadata.response_code, rcode);
    }
    // A zero-length frame ends the conversation.
    c.write_all(&[0, 0]).await.unwrap();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(2), c.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
}

/// Eight connections, each asking `n` questions one after another (the next once the last is
/// answered); every answer is checked.
async fn ask_in_turn(dns: std::net::SocketAddr, n: u16) {
    let mut clients = Vec::new();
    for k in 0..8u16 {
        clients.push(tokio::spawn(async move {
            let mut c = tokio::net::TcpStream::connect(dns).await.unwrap();
            for i in 0..n {
                let mut q = query("web.shop.svc.clusterset.local", RecordType::A, None);
                let id = k * 1000 + i;
                q[..2].copy_from_slice(&id.to_be_bytes());
                c.write_all(&(q.len() as u16).to_be_bytes()).await.unwrap();
                c.write_all(&q).await.unwrap();
                let buf = common::read_framed(&mut c).await.unwrap();
                let m = Message::from_vec(&buf).unwrap();
                assert_eq!(m.metadata.id, id);
                assert_eq!(m.metadata.response_code, ResponseCode::NoError);
                assert_eq!(m.answers.len(), 1);
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
}

#[tokio::test]
async fn tcp_workers_wait_only_as_coalescing_asks() {
    let _module = common::module(module_path!());
    // The default: a worker waits only at thousands of queries a second.
    let auto = start(ONE).await;
    // 1ms: after every wake-up that answered something.
    let always = start_with(ONE, |c| {
        c.server.tcp.coalesce = clusterset_dns::dns::tcp::parse_coalesce("1ms").unwrap();
    })
    .await;
    for s in [&auto, &always] {
        ask_in_turn(s.dns, 25).await;
    }
    let waits = "clusterset_dns_tcp_coalesce_waits_total";
    let waited = "clusterset_dns_tcp_coalesce_wait_seconds_total";
    assert_eq!(common::metric(auto.admin, waits).await, 0.0);
    assert_eq!(common::metric(auto.admin, waited).await, 0.0);
    // Each connection's 25 answers took 25 wake-ups at least, one after another, and a wait
    // followed each.
    let n = common::metric(always.admin, waits).await;
    assert!(n >= 25.0, "{n} waits");
    let mean = common::metric(always.admin, waited).await / n;
    assert!((mean - 0.001).abs() < 1e-6, "mean wait {mean}s");
}

#[tokio::test]
async fn tcp_idle_connections_are_closed_and_capped() {
    let _module = common::module(module_path!());
    let s = start_with(ONE, |c| {
        c.server.tcp.idle_timeout = Duration::from_millis(600);
        c.server.tcp.max_connections = 2;
    })
    .await;
    let web = || query("web.shop.svc.clusterset.local", RecordType::A, None);
    let mut buf = [0u8; 2];
    let closed = |mut c: tokio::net::TcpStream, within: u64| async move {
        let mut buf = [0u8; 2];
        let n = tokio::time::timeout(Duration::from_millis(within), c.read(&mut buf))
            .await
            .expect("closed in time")
            .unwrap_or(0);
        assert_eq!(n, 0);
    };
    let idle1 = tokio::net::TcpStream::connect(s.dns).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut busy = tokio::net::TcpStream::connect(s.dns).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    // The busy one asks a query: now the first is the one idle longest.
    let q = web();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    busy.write_all(&framed).await.unwrap();
    busy.read_exact(&mut buf).await.unwrap();
    let mut answer = vec![0u8; u16::from_be_bytes(buf) as usize];
    busy.read_exact(&mut answer).await.unwrap();
    // A third client at the cap of two is served; the longest-idle connection makes room.
    let r = exchange(s.dns, Proto::Tcp, &web()).await;
    assert_eq!(r.answers.len(), 1);
    closed(idle1, 300).await;
    // UDP is unaffected.
    assert_eq!(exchange(s.dns, Proto::Udp, &web()).await.answers.len(), 1);
    // Idle connections are closed after the idle timeout.
    closed(busy, 2000).await;
    assert_eq!(
        common::metric(s.admin, "clusterset_dns_tcp_connections_evicted_total").await,
        1.0
    );
}

#[tokio::test]
async fn several_zones_each_with_its_own_soa() {
    let _module = common::module(module_path!());
    let s = start_with(ONE, |c| {
        c.zone.zones =
            clusterset_dns::zone::Zones::parse(&["clusterset.local", "cluster.local"]).unwrap();
    })
    .await;
    for zone in ["clusterset.local", "cluster.local"] {
        let r = exchange(
            s.dns,
            Proto::Udp,
            &query(&format!("web.shop.svc.{zone}"), RecordType::A, None),
        )
        .await;
        assert_eq!(r.answers.len(), 1, "{zone}");
        let r = exchange(
            s.dns,
            Proto::Udp,
            &query(&format!("nope.shop.svc.{zone}"), RecordType::A, None),
        )
        .await;
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
        assert_eq!(r.authorities[0].name.to_string(), format!("{zone}."));
    }
    let r = exchange(
        s.dns,
        Proto::Udp,
        &query("web.shop.svc.other.local", RecordType::A, None),
    )
    .await;
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
}

#[tokio::test]
async fn name_server_address_is_glue_and_answers() {
    let _module = common::module(module_path!());
    let s = start_with(ONE, |c| {
        c.zone.ns_addresses = vec!["10.96.0.53".parse().unwrap(), "fd00::53".parse().unwrap()];
    })
    .await;
    let r = exchange(
        s.dns,
        Proto::Udp,
        &query("clusterset.local", RecordType::NS, Some(1232)),
    )
    .await;
    let glue: Vec<String> = r
        .additionals
        .iter()
        .map(|a| format!("{} {}", a.name, a.data))
        .collect();
    assert_eq!(
        glue,
        [
            "ns.dns.clusterset.local. 10.96.0.53",
            "ns.dns.clusterset.local. fd00::53"
        ]
    );
    let r = exchange(
        s.dns,
        Proto::Udp,
        &query("ns.dns.clusterset.local", RecordType::AAAA, None),
    )
    .await;
    assert_eq!(r.answers[0].data.to_string(), "fd00::53");
}

#[tokio::test]
async fn metrics_count_requests_by_type_and_responses_by_rcode() {
    let _module = common::module(module_path!());
    let s = start(ONE).await;
    for _ in 0..3 {
        exchange(
            s.dns,
            Proto::Udp,
            &query("web.shop.svc.clusterset.local", RecordType::A, None),
        )
        .await;
    }
    exchange(
        s.dns,
        Proto::Tcp,
        &query("nope.shop.svc.clusterset.local", RecordType::SRV, None),
    )
    .await;
    exchange(
        s.dns,
        Proto::Udp,
        &query("example.com", RecordType::A, None),
    )
    .await;
    let server = format!("dns://{}", s.dns);
    let udp_a = format!(
        "coredns_dns_requests_total{{family=\"1\",proto=\"udp\",server=\"{server}\",type=\"A\",view=\"\",zone=\"clusterset.local.\"}}"
    );
    let tcp_srv = format!(
        "coredns_dns_requests_total{{family=\"1\",proto=\"tcp\",server=\"{server}\",type=\"SRV\",view=\"\",zone=\"clusterset.local.\"}}"
    );
    let nx = format!(
        "coredns_dns_responses_total{{plugin=\"\",rcode=\"NXDOMAIN\",server=\"{server}\",view=\"\",zone=\"clusterset.local.\"}}"
    );
    let refused = format!(
        "coredns_dns_responses_total{{plugin=\"\",rcode=\"REFUSED\",server=\"{server}\",view=\"\",zone=\"dropped\"}}"
    );
    assert_eq!(common::metric(s.admin, &udp_a).await, 3.0);
    assert_eq!(common::metric(s.admin, &tcp_srv).await, 1.0);
    assert_eq!(common::metric(s.admin, &nx).await, 1.0);
    assert_eq!(common::metric(s.admin, &refused).await, 1.0);
    assert_eq!(
        common::metric(s.admin, "clusterset_dns_services").await,
        1.0
    );
    let (status, _) = common::http_get(s.admin, "/health").await.unwrap();
    assert_eq!(status, 200);
    let (status, _) = common::http_get(s.admin, "/nope").await.unwrap();
    assert_eq!(status, 404);
}

#[tokio::test]
async fn ipv6_clients_over_udp_and_tcp_are_counted_as_family_2() {
    let _module = common::module(module_path!());
    let s = common::start_on("[::1]:0", ONE, |_| {}).await;
    for proto in [Proto::Udp, Proto::Tcp] {
        let r = exchange(
            s.dns,
            proto,
            &query("web.shop.svc.clusterset.local", RecordType::A, None),
        )
        .await;
        assert_eq!(r.answers.len(), 1, "{proto:?}");
    }
    let server = format!("dns://{}", s.dns);
    for proto in ["udp", "tcp"] {
        let series = format!(
            "coredns_dns_requests_total{{family=\"2\",proto=\"{proto}\",server=\"{server}\",type=\"A\",view=\"\",zone=\"clusterset.local.\"}}"
        );
        assert_eq!(common::metric(s.admin, &series).await, 1.0, "{series}");
    }
}
