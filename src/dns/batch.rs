//! Answering several queries at once with their lookups' memory waits overlapped.

use super::query::{Parsed, parse};
use super::{Outcome, Transport, respond_to};
use crate::zone::View;

/// Queries answered together by [`Batch::respond`].
pub const BATCH: usize = 32;

/// Answers queries in batches, overlapping the memory waits of their lookups: it parses every
/// query and starts loading each name's table segment pointer, then each slot, then each entry,
/// then writes the answers. With a zone far bigger than the CPU caches, a lone lookup waits for
/// memory up to three times; a batch waits about once per stage for all its names. Answers are
/// byte for byte those of [`respond_in`](super::respond_in), which shares every step but the prefetching.
pub struct Batch {
    /// Lower-cased question names, one per query, reused from batch to batch.
    names: Box<[[u8; 255]; BATCH]>,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            names: Box::new([[0; 255]; BATCH]),
        }
    }
}

impl Batch {
    /// Answers `packets[i]` into `outs[i]`, and sets `outcomes[i]` as [`respond_in`](super::respond_in) returns it
    /// (`None`: send nothing, as for an empty packet). At most [`BATCH`] packets, and as many
    /// outs and outcomes.
    pub fn respond(
        &mut self,
        view: &View<'_>,
        packets: &[&[u8]],
        transport: Transport,
        outs: &mut [Vec<u8>],
        outcomes: &mut [Option<Outcome>],
    ) {
        assert!(packets.len() <= BATCH && outs.len() >= packets.len());
        assert!(outcomes.len() >= packets.len());
        let mut parsed: [Parsed<'_>; BATCH] = std::array::from_fn(|_| Parsed::Drop);
        let mut hashes: [Option<u64>; BATCH] = [None; BATCH];
        for (((p, name), q), hash) in packets
            .iter()
            .zip(self.names.iter_mut())
            .zip(&mut parsed)
            .zip(&mut hashes)
        {
            *q = parse(p, name);
            if let Parsed::Query(q) = q {
                let h = view.hash(q.lname);
                view.prefetch_segment(h);
                *hash = Some(h);
            }
        }
        for &hash in hashes.iter().flatten() {
            view.prefetch_slot(hash);
        }
        let found = hashes.map(|hash| hash.map(|h| view.candidate(h)));
        for (((q, found), out), outcome) in parsed[..packets.len()]
            .iter()
            .zip(found)
            .zip(outs)
            .zip(outcomes)
        {
            *outcome = respond_to(view, q, found, transport, out);
        }
    }
}
