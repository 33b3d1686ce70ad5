//! Load with churn through the file source: the real binary answers a steady stream of UDP
//! queries while a writer rewrites its file every 10 ms (services appearing, disappearing and
//! changing address, endpoints added and removed: thousands of changes a second). Every answer
//! is checked against the states it could legally reflect; names that exist throughout must
//! never be missing; RSS must not grow from one cycle of states to the next.
//!
//! Seconds in CI; `CLUSTERSET_DNS_SOAK_SECS=600 cargo test --release --test integration soak:: -- --nocapture`
//! by hand.

use crate::common;

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{a_records, http_get, spawn_binary, udp_exchange_blocking};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

const STABLE: usize = 40;
const CHURN: usize = 40;
const HEADLESS: usize = 10;
/// Versions in one cycle: the state of version v equals that of v + CYCLE.
const CYCLE: u64 = 100;
/// Longest the server may take to serve a version after it is written (poll interval 10 ms).
const LAG: Duration = Duration::from_secs(2);

/// What a name answers in version `v`: `None` for NXDOMAIN, else the A addresses.
fn expected(name: &Name, v: u64) -> Option<BTreeSet<String>> {
    match *name {
        Name::Stable(i) => Some(BTreeSet::from([format!("10.1.0.{i}")])),
        Name::Churn(j) => {
            ((j as u64 + v) % 4 != 0).then(|| BTreeSet::from([format!("10.2.{}.{j}", v % 25)]))
        }
        Name::Headless(k) => {
            let n = v % 4 + 1;
            Some((1..=n).map(|e| format!("10.3.{k}.{e}")).collect())
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Name {
    Stable(usize),
    Churn(usize),
    Headless(usize),
}

impl Name {
    fn text(&self) -> String {
        match self {
            Name::Stable(i) => format!("stable-{i}.soak.svc.clusterset.local"),
            Name::Churn(j) => format!("churn-{j}.soak.svc.clusterset.local"),
            Name::Headless(k) => format!("hl-{k}.soak.svc.clusterset.local"),
        }
    }
}

fn objects(v: u64) -> String {
    let import = |name: &str, spec: &str| {
        format!(
            "---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: soak}}\nspec: {spec}\n"
        )
    };
    let mut y = String::new();
    for i in 0..STABLE {
        y += &import(
            &format!("stable-{i}"),
            &format!(
                "{{type: ClusterSetIP, ips: [10.1.0.{i}], ports: [{{name: http, port: 80}}]}}"
            ),
        );
    }
    for j in 0..CHURN {
        if let Some(ips) = expected(&Name::Churn(j), v) {
            let ip = ips.into_iter().next().unwrap();
            y += &import(
                &format!("churn-{j}"),
                &format!("{{type: ClusterSetIP, ips: [{ip}], ports: [{{name: http, port: 80}}]}}"),
            );
        }
    }
    for k in 0..HEADLESS {
        y += &import(
            &format!("hl-{k}"),
            "{type: Headless, ports: [{name: http, port: 80}]}",
        );
        y += &format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: hl-{k}-east\n  namespace: soak\n  labels: {{multicluster.kubernetes.io/service-name: hl-{k}, multicluster.kubernetes.io/source-cluster: east}}\n\
             addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints:\n"
        );
        for a in expected(&Name::Headless(k), v).unwrap() {
            y += &format!("- addresses: [{a}]\n");
        }
    }
    y
}

/// Changes between two consecutive versions (services added, removed or changed; endpoints
/// added or removed), to report the churn rate.
fn changes(v: u64) -> usize {
    let mut n = 0;
    for j in 0..CHURN {
        if expected(&Name::Churn(j), v) != expected(&Name::Churn(j), v + 1) {
            n += 1;
        }
    }
    for k in 0..HEADLESS {
        let (a, b) = (
            expected(&Name::Headless(k), v).unwrap(),
            expected(&Name::Headless(k), v + 1).unwrap(),
        );
        n += a.symmetric_difference(&b).count();
    }
    n
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn answers_stay_right_under_churn_and_memory_stays_flat() {
    let _module = common::module(module_path!());
    let secs: u64 = std::env::var("CLUSTERSET_DNS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, objects(0)).unwrap();
    let server = spawn_binary(&[
        "--file",
        file.to_str().unwrap(),
        "--file-poll-interval",
        "10ms",
    ]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ready = rt.block_on(common::eventually(10, || async {
        http_get(server.admin, "/ready").await.map(|(s, _)| s) == Some(200)
    }));
    assert!(ready);
    let pid = server.child.id();

    // The writer: a new version every 10 ms, each written whole and renamed into place.
    let history: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::new(Mutex::new(vec![(Instant::now(), 0)]));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (history, stop, file) = (history.clone(), stop.clone(), file.clone());
        std::thread::spawn(move || {
            let mut v = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                v += 1;
                let tmp = file.with_extension("tmp");
                std::fs::write(&tmp, objects(v)).unwrap();
                // Recorded before the rename: the server cannot serve it earlier.
                history.lock().unwrap().push((Instant::now(), v));
                std::fs::rename(&tmp, &file).unwrap();
            }
            v
        })
    };

    let names: Vec<Name> = (0..STABLE)
        .map(Name::Stable)
        .chain((0..CHURN).map(Name::Churn))
        .chain((0..HEADLESS).map(Name::Headless))
        .collect();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let dns: SocketAddr = server.dns;
    let started = Instant::now();
    let (mut checked, mut wrong, mut lost) = (0u64, Vec::new(), 0u64);
    let mut rss_at_cycle = Vec::new();
    let mut cycle = 0;
    let mut next = 0usize;
    while started.elapsed() < Duration::from_secs(secs) {
        // One sample each time the writer starts a new cycle of states.
        let latest = history.lock().unwrap().last().map_or(0, |(_, v)| *v);
        if latest / CYCLE > cycle {
            cycle = latest / CYCLE;
            rss_at_cycle.push(rss_kb(pid));
        }
        let name = names[next % names.len()];
        next += 1;
        let ts = Instant::now();
        let m = udp_exchange_blocking(
            &sock,
            dns,
            &common::query(&name.text(), RecordType::A, None),
        );
        let tr = Instant::now();
        let Some(m) = m else {
            lost += 1;
            continue;
        };
        let got = match m.metadata.response_code {
            ResponseCode::NXDomain => None,
            ResponseCode::NoError => Some(
                a_records(&m)
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<BTreeSet<String>>(),
            ),
            other => {
                wrong.push(format!("{}: {other:?}", name.text()));
                continue;
            }
        };
        assert!(m.answers.iter().all(|r| r.record_type() == RecordType::A));
        // The versions current at some moment in [ts - LAG, tr].
        let h = history.lock().unwrap();
        // h is in time order: from the last version written before ts - LAG (still current
        // then) to the last written by tr.
        let lo = h
            .partition_point(|(written, _)| *written + LAG <= ts)
            .saturating_sub(1);
        let hi = h.partition_point(|(written, _)| *written <= tr);
        let legal: Vec<u64> = h[lo..hi.max(lo + 1)].iter().map(|(_, v)| *v).collect();
        drop(h);
        checked += 1;
        if !legal.iter().any(|&v| expected(&name, v) == got) {
            wrong.push(format!(
                "{}: {got:?}, legal versions {:?}",
                name.text(),
                (legal.first(), legal.last())
            ));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let versions = writer.join().unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let total_changes: usize = (0..versions).map(changes).sum();
    eprintln!(
        "soak: {elapsed:.1} s, {checked} answers checked ({:.0} qps), {} wrong, {lost} lost; {versions} versions, {total_changes} changes ({:.0}/s); RSS at each cycle (KB): {rss_at_cycle:?}",
        checked as f64 / elapsed,
        wrong.len(),
        total_changes as f64 / elapsed
    );
    assert!(
        wrong.is_empty(),
        "wrong answers: {:?}",
        &wrong[..wrong.len().min(10)]
    );
    assert!(checked > 1000, "only {checked} answers checked");
    assert!(total_changes as f64 / elapsed > 200.0, "churn too slow");
    assert!(lost * 100 <= checked, "{lost} queries lost");
    // Each sample is one cycle of states apart: memory must not keep growing.
    if rss_at_cycle.len() >= 3 {
        let first = rss_at_cycle[1];
        let last = *rss_at_cycle.last().unwrap();
        assert!(
            last <= first + first / 5 + 2048,
            "RSS grew from {first} KB to {last} KB"
        );
    }
}
