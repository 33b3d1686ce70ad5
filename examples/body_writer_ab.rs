//! Our answer-body writer (`zone::render::BodyWriter`) against hickory-proto's `BinEncoder`, on
//! the same records (docs/architecture.md, "The crates the design names"): builds the benchmark
//! zone of N services (`benches/workload`) plus `--wide` headless services of many endpoints,
//! asks the zone every (name, type) it holds over TCP, reads each answer back with hickory, and
//! then writes the same records again both ways: hickory's `Message::to_vec` (header and
//! question first, so owners compress to offset 12, as ours) and our `BodyWriter`. It reports
//! how many bodies come out byte for byte alike, their sizes, and the time each writer takes for
//! all of them (median of ROUNDS).
//!
//! usage: body_writer_ab N WIDE ROUNDS   (e.g. 100000 20 5)

#[path = "../benches/workload/mod.rs"]
#[allow(dead_code)]
mod workload;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use clusterset_dns::dns::{Transport, respond};
use clusterset_dns::metrics::Metrics;
use clusterset_dns::model::{
    Endpoint, Port, Protocol, Service, ServiceKey, ServiceType, Slice, Update,
};
use clusterset_dns::wire::wire_name;
use clusterset_dns::zone::Zone;
use clusterset_dns::zone::build::Builder;
use clusterset_dns::zone::render::BodyWriter;
use hickory_proto::op::Message;
use hickory_proto::rr::{RData, Record, RecordType};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(n), Some(wide), Some(rounds)) = (
        args.next().and_then(|a| a.parse::<usize>().ok()),
        args.next().and_then(|a| a.parse::<usize>().ok()),
        args.next().and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: body_writer_ab N WIDE ROUNDS");
        std::process::exit(2);
    };
    let zone = build(n, wide);
    // Every (owner, type) the zone holds, from its master-file form.
    let text = clusterset_dns::dns::transfer::zone_text(&zone);
    let asked: BTreeSet<(String, String)> = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.to_string(), f.get(3)?.to_string()))
        })
        .filter(|(_, t)| ["A", "AAAA", "SRV"].contains(&t.as_str()))
        .collect();
    let mut ours = Vec::new();
    let mut messages = Vec::new();
    for (name, rtype) in &asked {
        let qtype: RecordType = rtype.parse().unwrap();
        let q = query(name, qtype);
        let mut out = Vec::new();
        respond(&zone, &q, Transport::Tcp, &mut out).expect("an answer");
        let m = Message::from_vec(&out).expect("hickory reads our answer");
        messages.push((wire_name(name).unwrap(), m));
        ours.push(out);
    }
    // Written again by hickory, in full, and compared with what the zone holds.
    let theirs: Vec<Vec<u8>> = messages.iter().map(|(_, m)| m.to_vec().unwrap()).collect();
    let same = ours.iter().zip(&theirs).filter(|(a, b)| a == b).count();
    let bytes = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
    let differ: Vec<usize> = (0..ours.len()).filter(|&i| ours[i] != theirs[i]).collect();
    println!(
        "{} bodies ({n} services + {wide} headless of 250 endpoints): {same} alike byte for byte, {} differ; {} bytes ours, {} bytes hickory",
        ours.len(),
        differ.len(),
        bytes(&ours),
        bytes(&theirs)
    );
    if let Some(&i) = differ
        .iter()
        .max_by_key(|&&i| theirs[i].len() as i64 - ours[i].len() as i64)
    {
        println!(
            "  e.g. {} {}: {} answers + {} additional, {} bytes ours, {} bytes hickory",
            asked.iter().nth(i).unwrap().0,
            asked.iter().nth(i).unwrap().1,
            messages[i].1.answers.len(),
            messages[i].1.additionals.len(),
            ours[i].len(),
            theirs[i].len()
        );
    }
    // The writers alone, on the records already made: ours from the parsed values, hickory's
    // from its records.
    let plans: Vec<(Vec<u8>, Vec<Op>, Vec<Op>)> = messages
        .iter()
        .map(|(q, m)| (q.clone(), ops(&m.answers), ops(&m.additionals)))
        .collect();
    let mut t_ours = Vec::new();
    let mut t_theirs = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let mut total = 0;
        for (qname, answers, additionals) in &plans {
            total += write_ours(qname, answers, additionals);
        }
        t_ours.push(t.elapsed().as_secs_f64());
        std::hint::black_box(total);
        let t = Instant::now();
        let mut total = 0;
        for (_, m) in &messages {
            total += m.to_vec().unwrap().len();
        }
        t_theirs.push(t.elapsed().as_secs_f64());
        std::hint::black_box(total);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (o, omin, omax) = median(&mut t_ours);
    let (h, hmin, hmax) = median(&mut t_theirs);
    let per = |s: f64| s * 1e9 / messages.len() as f64;
    println!(
        "writing all bodies, median of {rounds} [min-max]: ours {:.1} ms [{:.1}-{:.1}] ({:.0} ns a body), hickory {:.1} ms [{:.1}-{:.1}] ({:.0} ns a body), ratio {:.2}",
        o * 1e3,
        omin * 1e3,
        omax * 1e3,
        per(o),
        h * 1e3,
        hmin * 1e3,
        hmax * 1e3,
        per(h),
        h / o
    );
}

/// The benchmark zone, plus `wide` headless services of 250 endpoints over five clusters.
fn build(n: usize, wide: usize) -> Arc<Zone> {
    let zone = Arc::new(Zone::new(vec![wire_name("clusterset.local").unwrap()], 5));
    let metrics = Arc::new(Metrics::new(
        "dns://ab".into(),
        vec!["clusterset.local.".into()],
    ));
    let mut b = Builder::new(zone.clone(), &[], metrics);
    let mut services = workload::services(n);
    let http = Port {
        name: Some("http".into()),
        protocol: Protocol::Tcp,
        port: 80,
    };
    for w in 0..wide {
        services.push(Service {
            locality: clusterset_dns::model::Locality::Any,
            slices_absent: false,
            origin: clusterset_dns::model::ObjectKind::ServiceImport,
            key: ServiceKey {
                namespace: "wide".into(),
                name: format!("big{w}"),
            },
            kind: ServiceType::Headless,
            ips: vec![],
            ports: vec![http.clone()],
            slices: (0..5)
                .map(|c| Slice {
                    name: format!("big{w}-c{c}"),
                    cluster: Some(format!("c{c}")),
                    ports: vec![http.clone()],
                    endpoints: (0..50)
                        .map(|e| Endpoint {
                            addresses: vec![std::net::IpAddr::V4(std::net::Ipv4Addr::new(
                                10,
                                200 + c as u8,
                                w as u8,
                                e as u8,
                            ))],
                            hostname: Some(format!("pod-{e}")),
                        })
                        .collect(),
                })
                .collect(),
        });
    }
    b.apply(Update::Reset(services.into()));
    zone
}

fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&wire_name(name).unwrap());
    m.extend_from_slice(&u16::from(qtype).to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m
}

/// One record as our writer takes it.
enum Op {
    Addr(Vec<u8>, std::net::IpAddr, u32),
    Srv(Vec<u8>, u16, u16, u16, Vec<u8>, u32),
}

/// A message's records in our writer's terms (made before timing, as hickory's records are).
fn ops(records: &[Record]) -> Vec<Op> {
    records
        .iter()
        .filter_map(|r| {
            let owner = wire_name(&r.name.to_ascii()).unwrap();
            Some(match &r.data {
                RData::A(a) => Op::Addr(owner, std::net::IpAddr::V4(a.0), r.ttl),
                RData::AAAA(a) => Op::Addr(owner, std::net::IpAddr::V6(a.0), r.ttl),
                RData::SRV(s) => Op::Srv(
                    owner,
                    s.priority,
                    s.weight,
                    s.port,
                    wire_name(&s.target.to_ascii()).unwrap(),
                    r.ttl,
                ),
                _ => return None,
            })
        })
        .collect()
}

/// Our writer over the same records; the body's length.
fn write_ours(qname: &[u8], answers: &[Op], additionals: &[Op]) -> usize {
    let mut w = BodyWriter::new(qname);
    let put = |w: &mut BodyWriter, op: &Op| match op {
        Op::Addr(owner, ip, ttl) => w.addr(owner, *ip, *ttl),
        Op::Srv(owner, priority, weight, port, target, ttl) => {
            w.srv(owner, *priority, *weight, *port, target, *ttl)
        }
    };
    for op in answers {
        put(&mut w, op);
    }
    w.additional();
    for op in additionals {
        put(&mut w, op);
    }
    w.finish().bytes.len()
}
