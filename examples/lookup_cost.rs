//! The work of a lone lookup, counted rather than timed, for `benches/flatness.sh`: builds the
//! benchmark zone of N services (`benches/workload`), then looks up its 1,024 names PASSES
//! times through one view, as benches/lookup.rs's `lookup/hit` does. Under
//! `valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*lookups*'` the counts are those
//! of the lookups alone, in instructions and simulated cache misses, whatever else the machine
//! is doing.
//!
//! usage: lookup_cost N PASSES

#[path = "../benches/workload/mod.rs"]
mod workload;

use std::hint::black_box;

use clusterset_dns::wire::wire_name;
use clusterset_dns::zone::{Lookup, View};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(n), Some(passes)) = (
        args.next().and_then(|a| a.parse::<usize>().ok()),
        args.next().and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: lookup_cost N PASSES");
        std::process::exit(2);
    };
    let zone = workload::zone(n);
    let view = zone.view();
    let wires: Vec<Vec<u8>> = workload::names(n, true)
        .iter()
        .map(|s| wire_name(s).unwrap())
        .collect();
    let found = lookups(&view, &wires, passes);
    assert_eq!(found, passes * wires.len(), "every name is in the zone");
}

/// The measured part (callgrind counts only inside it: `--toggle-collect=*lookups*`).
#[inline(never)]
fn lookups(view: &View<'_>, wires: &[Vec<u8>], passes: usize) -> usize {
    let mut found = 0;
    for _ in 0..passes {
        for w in wires {
            found += black_box(view.lookup(black_box(w), |l| {
                matches!(l, Lookup::Inside { entry: Some(_), .. })
            })) as usize;
        }
    }
    found
}
