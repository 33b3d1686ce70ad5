//! Fuzzing entry points, shared by the `cargo fuzz` targets in `fuzz/` and by the test that
//! replays their committed corpus (`tests/integration/fuzz_corpus.rs`), so both check the same properties.
//! Not part of the server's API.

use std::sync::{Arc, OnceLock};

use crate::dns::transfer::{answers, transfer};
use crate::dns::{Batch, Transport, UDP_PAYLOAD, respond, respond_in};
use crate::metrics::Metrics;
use crate::model::Update;
use crate::source::file::classify_with;
use crate::source::file::parse_text;
use crate::source::policy::Policy;
use crate::source::store::Store;
use crate::source::{Classified, Selection, kinds, linkerd};
use crate::wire::wire_name;
use crate::zone::Zone;
use crate::zone::build::Builder;

const EXAMPLE: &str = include_str!("../examples/clusterset.yaml");

/// Builds a synced zone from the objects in `text` (the example cluster set when `None`).
fn zone_from(text: &str) -> Arc<Zone> {
    let metrics = Arc::new(Metrics::new(
        "dns://fuzz".into(),
        vec!["clusterset.local.".into()],
    ));
    let zone = Arc::new(Zone::new(
        vec![wire_name("clusterset.local").expect("a valid zone")],
        5,
    ));
    let mut builder = Builder::new(zone.clone(), &[], metrics);
    // Every kind a source can read, Linkerd's mirrors too.
    let everything = Selection {
        mcs: true,
        linkerd: Some(linkerd::Config {
            mirrors: true,
            ..Default::default()
        }),
        cluster_id: None,
    };
    let kinds = kinds(&everything, None);
    let mut store = Store::new(&kinds, None);
    let policy = Policy::default();
    let _ = parse_text(text, &mut |v| {
        if let Classified::Object(o) = classify_with(v, &policy, &kinds) {
            store.insert(o);
        }
    });
    builder.apply(Update::Reset(store.into_snapshot()));
    zone
}

fn example_zone() -> &'static Arc<Zone> {
    static ZONE: OnceLock<Arc<Zone>> = OnceLock::new();
    ZONE.get_or_init(|| zone_from(EXAMPLE))
}

/// Query bytes → response bytes over both transports, and the transfer path. Panics when a
/// property a client relies on does not hold: a response echoes the ID, has QR set, parses,
/// and over UDP fits the client's size (512 without EDNS, at most 1232).
pub fn query(data: &[u8]) {
    let zone = example_zone();
    let (mut out, mut out_one) = (Vec::new(), Vec::new());
    for transport in [Transport::Udp, Transport::Tcp] {
        let Some(outcome) = respond(zone, data, transport, &mut out) else {
            continue;
        };
        assert!(out.len() >= 12, "short response");
        assert_eq!(out[..2], data[..2], "the response echoes the ID");
        assert!(out[2] & 0x80 != 0, "QR is set");
        assert_eq!(
            (out[3] & 0x0F) as u16,
            outcome.rcode & 0x0F,
            "the header carries the rcode"
        );
        assert!(answers(&out).is_some(), "the response parses: {out:?}");
        if transport == Transport::Udp {
            // Without an OPT record (ARCOUNT 0) the client's limit is 512 bytes.
            let limit = if data.get(10..12) == Some(&[0, 0]) {
                512
            } else {
                UDP_PAYLOAD as usize
            };
            assert!(
                out.len() <= limit,
                "UDP response of {} bytes over {limit}",
                out.len()
            );
        }
    }
    // The UDP workers answer in batches: the same bytes as one at a time, wherever in a batch
    // the query is and whatever shares the batch with it.
    let view = zone.view();
    let mut other = vec![0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    other.extend(wire_name("checkout.shop.svc.clusterset.local").expect("a valid name"));
    other.extend_from_slice(&[0, 1, 0, 1]);
    let packets: [&[u8]; 4] = [data, &other, data, &data[..data.len() / 2]];
    let (mut outs, mut outcomes) = (vec![Vec::new(); 4], [None; 4]);
    Batch::default().respond(&view, &packets, Transport::Udp, &mut outs, &mut outcomes);
    for ((p, out), outcome) in packets.iter().zip(&outs).zip(outcomes) {
        let alone = respond_in(&view, p, Transport::Udp, &mut out_one);
        assert_eq!(outcome, alone, "a batch answers as one query at a time");
        if alone.is_some() {
            assert_eq!(*out, out_one, "a batch answers as one query at a time");
        }
    }
    let mut messages = Vec::new();
    if transfer(zone, data, &mut messages).is_some() {
        assert!(!messages.is_empty());
        for m in &messages {
            assert!(m.len() <= u16::MAX as usize);
            assert!(answers(m).is_some(), "a transfer message parses");
        }
    }
}

/// A file's bytes → objects → zone → a few answers: any input may be rejected, none may panic.
pub fn objects(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let zone = zone_from(text);
    let mut out = Vec::new();
    for snapshot in zone.snapshot() {
        let mut q = vec![0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(snapshot.name());
        q.extend_from_slice(&[0, 255, 0, 1]);
        for qtype in snapshot.types() {
            let n = q.len();
            q[n - 4..n - 2].copy_from_slice(&qtype.to_be_bytes());
            let outcome = respond(&zone, &q, Transport::Tcp, &mut out).expect("an answer");
            assert_eq!(outcome.apex, Some(0));
            assert!(answers(&out).is_some(), "the response parses");
        }
    }
}

/// Frame bytes → the XDP path's reading of them. Panics when a frame is read past its end (any
/// panic), or when an accepted frame's answer, written back, does not read as the same exchange
/// seen from the other side: the addresses swapped, the message intact.
pub fn frame(data: &[u8]) {
    use crate::dns::xdp::frame::{parse, write};
    // The port the frame is to, if it has one where IPv4 or IPv6 would put it, and 53.
    let ports = [36usize, 56].map(|at| {
        data.get(at..at + 2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]))
    });
    // (A server never serves port 0: it listens on the port it was bound to.)
    for port in ports.into_iter().flatten().filter(|&p| p != 0).chain([53]) {
        let Ok((reply, message)) = parse(data, port) else {
            continue;
        };
        assert_eq!(reply.server.port(), port);
        let mut out = vec![0u8; reply.header_len() + message.len()];
        let n = write(&reply, message, &mut out);
        assert_eq!(n, out.len());
        let (back, echoed) = parse(&out, reply.client.port())
            .unwrap_or_else(|why| panic!("our own answer frame is dropped: {why:?}"));
        assert_eq!((back.client, back.server), (reply.server, reply.client));
        assert_eq!(
            (back.client_mac, back.server_mac),
            (reply.server_mac, reply.client_mac)
        );
        assert_eq!(echoed, message);
    }
}
