//! Lookup and full query-to-response cost on zones of 1k, 10k and 100k services (nine in ten
//! ClusterSetIP, one in ten headless with six endpoints over three clusters), for names that
//! exist and names that do not. Each iteration takes the next of 1024 different names, so the
//! figures include hashing and cache misses of a real mix rather than one hot key.

mod workload;

use std::hint::black_box;
use std::time::Instant;

use clusterset_dns::dns::{BATCH, Batch, Transport, respond_in};
use clusterset_dns::wire::wire_name;
use clusterset_dns::zone::Lookup;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use workload::{names, zone};

fn packet(name: &str, qtype: u16) -> Vec<u8> {
    let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
    p.extend(wire_name(name).unwrap());
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    // OPT, 1232 bytes, as a stub resolver or CoreDNS's forward plugin sends it.
    p.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
    p
}

fn bench(c: &mut Criterion) {
    for n in [1_000, 10_000, 100_000] {
        let z = zone(n);
        // As a UDP worker does: one view, refreshed before each answer (it does so per batch).
        let mut view = z.view();
        let mut g = c.benchmark_group(format!("{}k_services", n / 1000));
        g.throughput(Throughput::Elements(1));
        for hit in [true, false] {
            let what = if hit { "hit" } else { "miss" };
            let wires: Vec<Vec<u8>> = names(n, hit)
                .iter()
                .map(|s| wire_name(s).unwrap())
                .collect();
            let mut i = 0;
            g.bench_function(BenchmarkId::new("lookup", what), |b| {
                b.iter(|| {
                    i = (i + 1) & 1023;
                    black_box(view.lookup(black_box(&wires[i]), |l| {
                        matches!(l, Lookup::Inside { entry: Some(_), .. })
                    }))
                });
            });
            let packets: Vec<Vec<u8>> = names(n, hit).iter().map(|s| packet(s, 1)).collect();
            // As a UDP worker answers what one receive brought: a batch at a time (32 when
            // the socket is busy; about 4 at the load of benches/compare-knot.sh). The figure
            // is per query.
            let refs: Vec<&[u8]> = packets.iter().map(|p| &p[..]).collect();
            for size in [4, BATCH] {
                let mut batch = Batch::default();
                let mut outs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(4096)).collect();
                let mut outcomes = [None; BATCH];
                let mut i = 0;
                let id = BenchmarkId::new(format!("batch{size}_query_to_response"), what);
                g.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let batches = iters.div_ceil(size as u64);
                        let start = Instant::now();
                        for _ in 0..batches {
                            i = (i + size) & 1023;
                            view.refresh();
                            batch.respond(
                                &view,
                                black_box(&refs[i..i + size]),
                                Transport::Udp,
                                &mut outs,
                                &mut outcomes,
                            );
                            black_box(&outcomes);
                        }
                        start
                            .elapsed()
                            .mul_f64(iters as f64 / (batches * size as u64) as f64)
                    });
                });
            }
            let mut out = Vec::with_capacity(4096);
            let mut i = 0;
            g.bench_function(BenchmarkId::new("query_to_response", what), |b| {
                b.iter(|| {
                    i = (i + 1) & 1023;
                    view.refresh();
                    black_box(respond_in(
                        &view,
                        black_box(&packets[i]),
                        Transport::Udp,
                        &mut out,
                    ));
                });
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
