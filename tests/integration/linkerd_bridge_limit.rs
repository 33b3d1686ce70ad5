//! `--max-objects-per-link` through a real Link: two API servers set up as in
//! linkerd_bridge_conflicts.rs (a Link and its credentials Secret in `linkerd-multicluster`,
//! Linkerd's service mirror replayed), the linked cluster exporting more Services than the
//! limit. What the linked cluster sends beyond the limit is left out of the bridge's stores
//! (src/bridge/runtime/store.rs, `Writer::limited`); the bridge goes on, imports what it kept,
//! says so once in its log and counts the rest in `clusterset_dns_bridge_left_out_objects`
//! (docs/linkerd-bridge.md).

use crate::common;

use common::k8s::Cluster;
use common::until;

use crate::linkerd_bridge::Bridge;
use crate::linkerd_bridge_conflicts::{export, link_to, member, service_mirror};
use crate::linkerd_bridge_import::{list, summary};

/// The limit, and one Service more than it that the linked cluster exports.
const LIMIT: usize = 2;
const EXPORTS: [&str; LIMIT + 1] = ["alpha", "beta", "gamma"];

/// Which of [`EXPORTS`] east imports, and from where (see [`summary`]).
fn imported(east: &Cluster) -> Vec<(&'static str, String)> {
    EXPORTS
        .iter()
        .map(|n| (*n, summary(east, "shop", n)))
        .filter(|(_, s)| s != "none")
        .collect()
}

/// The series of `clusterset_dns_bridge_left_out_objects` for Link `linkerd-multicluster/west`
/// (0 when absent).
fn left_out(bridge: &Bridge) -> f64 {
    common::metric_in(
        &bridge.admin("/metrics").1,
        r#"clusterset_dns_bridge_left_out_objects{link="west",namespace="linkerd-multicluster"}"#,
    )
}

/// West exports the limit's worth, then one Service more, which arrives by a watch event: east
/// imports exactly the limit's worth, from west, its bridge still running and reading west; the
/// one left out is said once in the log and counted in the gauge, once the bridge has listed
/// west again to count it. Once west withdraws a kept export, its import goes, and the one left
/// out is read without changing, by the next list: nothing is left out then. Once the Link is
/// deleted, its series goes.
#[test]
fn a_linked_cluster_beyond_max_objects_per_link_is_read_in_part() {
    let _module = common::module(module_path!());
    let (east, west) = (
        member("east", "198.18.96.0/20"),
        member("west", "198.18.112.0/20"),
    );
    link_to(&east, &west, "west");
    let set = [("east", &east), ("west", &west)];
    let _west_bridge = Bridge::start(&west, &["--halves", "export"]);
    for name in &EXPORTS[..LIMIT] {
        export(&west, name, &["http:80/TCP"], false, "{}");
    }
    until("west's bridge to label its exports for Linkerd", 20, || {
        list(
            &west,
            "shop",
            "services",
            "mirror.linkerd.io/federated=member",
        )
        .len()
            == LIMIT
    });
    let limit = LIMIT.to_string();
    let mut bridge = Bridge::start(&east, &["--max-objects-per-link", &limit]);
    until(
        common::wait::Lazy(|| {
            format!(
                "east to import west's {LIMIT} exports with nothing left out: imports {:?}\n{}",
                imported(&east),
                bridge.log()
            )
        }),
        30,
        || {
            service_mirror(&set);
            imported(&east).len() == LIMIT && left_out(&bridge) == 0.0
        },
    );
    // The series is there from the first list: 0 is said, not left to be guessed.
    let scrape = bridge.admin("/metrics").1;
    assert!(
        scrape.contains(r#"clusterset_dns_bridge_left_out_objects{link="west",namespace="linkerd-multicluster"} 0"#),
        "{scrape}"
    );

    // (a) and (b): one export more, by a watch event: left out, and counted once the bridge
    // has listed west again (at most 30 s after its last list).
    let out = EXPORTS[LIMIT];
    export(&west, out, &["http:80/TCP"], false, "{}");
    let started = std::time::Instant::now();
    let holds = |bridge: &Bridge| {
        service_mirror(&set);
        let kept = imported(&east);
        kept.len() == LIMIT
            && kept
                .iter()
                .all(|(n, s)| *n != out && s.contains("clusters=west "))
            && left_out(bridge) == 1.0
    };
    let why = |bridge: &Bridge| {
        format!(
            "east to import {LIMIT} of west's {} exports and count 1 left out: imports {:?}, \
             left out {}\neast's bridge:\n{}",
            EXPORTS.len(),
            imported(&east),
            left_out(bridge),
            bridge.log()
        )
    };
    until(common::wait::Lazy(|| why(&bridge)), 45, || holds(&bridge));
    eprintln!(
        "{out}, beyond the limit, counted left out {:.1} s after west exported it",
        started.elapsed().as_secs_f64()
    );
    // And it stays so: the one left out does not come in late (before west was listed,
    // Linkerd's objects alone could import it).
    for _ in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(holds(&bridge), "{}", why(&bridge));
    }
    assert!(
        bridge.child.try_wait().unwrap().is_none(),
        "east's bridge exited\n{}",
        bridge.log()
    );
    let scrape = bridge.admin("/metrics").1;
    assert_eq!(
        common::metric_in(
            &scrape,
            r#"clusterset_dns_bridge_linked_clusters{state="read"}"#
        ),
        1.0,
        "{scrape}"
    );
    let log = bridge.log();
    let warned = format!("than --max-objects-per-link ({LIMIT})");
    assert_eq!(
        log.lines()
            .filter(|l| l.contains(&warned) && l.contains("link=linkerd-multicluster/west"))
            .count(),
        1,
        "one warning naming the Link and the limit\n{log}"
    );

    // (c) West withdraws a kept export: its import goes, and the next list (room having been
    // made) reads the one left out, unchanged since, and counts nothing left out.
    let gone = EXPORTS[0];
    west.delete("serviceexport", "shop", gone);
    let started = std::time::Instant::now();
    until(
        common::wait::Lazy(|| {
            format!(
                "east's import of {gone} to go and of {out} to come, nothing left out: imports {:?}, left out {}\neast's bridge:\n{}",
                imported(&east),
                left_out(&bridge),
                bridge.log()
            )
        }),
        45,
        || {
            service_mirror(&set);
            summary(&east, "shop", gone) == "none"
                && summary(&east, "shop", out).contains("clusters=west ")
                && left_out(&bridge) == 0.0
        },
    );
    eprintln!(
        "{out} imported and nothing left out {:.1} s after {gone} was withdrawn",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(imported(&east).len(), LIMIT, "{:?}", imported(&east));
    assert!(
        bridge.child.try_wait().unwrap().is_none(),
        "{}",
        bridge.log()
    );

    // (d) The Link deleted: west is read no more, and its series goes with it.
    east.delete("link", "linkerd-multicluster", "west");
    let series =
        r#"clusterset_dns_bridge_left_out_objects{link="west",namespace="linkerd-multicluster"}"#;
    until(
        common::wait::Lazy(|| {
            format!(
                "east's bridge to drop {series}\n{}",
                bridge.admin("/metrics").1
            )
        }),
        20,
        || !bridge.admin("/metrics").1.contains(series),
    );
}
