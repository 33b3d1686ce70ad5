//! Answering several queries at once with their lookups' memory waits overlapped.

use std::time::{Duration, Instant};

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

    /// [`Batch::respond`] for one receive batch of UDP datagrams (the socket workers' and the
    /// XDP workers'): each query's outcome, and how long the batch has taken since `start`,
    /// which each of its queries is accounted with.
    pub fn respond_datagrams(
        &mut self,
        view: &View<'_>,
        packets: &[&[u8]],
        outs: &mut [Vec<u8>],
        start: Instant,
    ) -> ([Option<Outcome>; BATCH], Duration) {
        let mut outcomes = [None; BATCH];
        let n = packets.len();
        self.respond(view, packets, Transport::Udp, outs, &mut outcomes[..n]);
        (outcomes, start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{big_zone, q};
    use super::super::{Outcome, respond_in};
    use super::*;

    #[test]
    fn a_batch_answers_byte_for_byte_as_one_query_at_a_time() {
        let zone = big_zone(3_000, 40);
        let view = zone.view();
        let with = |name: &str, qtype: u16, edns: Option<(u16, u8)>| {
            let mut m = q(name);
            let at = m.len() - 4;
            m[at..at + 2].copy_from_slice(&qtype.to_be_bytes());
            if let Some((payload, version)) = edns {
                m[11] = 1;
                m.extend_from_slice(&[0, 0, 41]);
                m.extend_from_slice(&payload.to_be_bytes());
                m.extend_from_slice(&[0, version, 0x80, 0, 0, 0]);
            }
            m
        };
        let mut packets: Vec<Vec<u8>> = Vec::new();
        for i in (0..3_000).step_by(37) {
            let name = format!("svc{i}.ns{}.svc.clusterset.local", i % 7);
            for qtype in [1, 28, 33, 6, 16, 255] {
                packets.push(with(&name, qtype, None));
                packets.push(with(&name.to_uppercase(), qtype, Some((1232, 0))));
            }
            // Big headless answers: whole, cut at the additional section, or TC.
            packets.push(with(&format!("_http._tcp.{name}"), 33, Some((512, 0))));
            packets.push(with(&format!("_http._tcp.{name}"), 33, None));
            packets.push(with(&format!("pod-1.east.{name}"), 1, None));
            packets.push(with(&format!("gone{i}.ns1.svc.clusterset.local"), 1, None));
            packets.push(with(&format!("svc{i}.example.org"), 1, None));
            packets.push(with(&name, 1, Some((1232, 1))));
            packets.push(with(&name, 252, None));
            let mut two = with(&name, 1, None);
            two[5] = 2;
            packets.push(two);
            let mut reply = with(&name, 1, None);
            reply[2] |= 0x80;
            packets.push(reply);
            packets.push(with(&name, 1, None)[..7].to_vec());
        }
        packets.push(Vec::new());
        let one: Vec<(Option<Outcome>, Vec<u8>)> = packets
            .iter()
            .map(|p| {
                let mut out = vec![0xAA; 3];
                (respond_in(&view, p, Transport::Udp, &mut out), out)
            })
            .collect();
        assert!(one.iter().any(|(o, _)| o.is_some_and(|o| o.truncated)));
        assert!(one.iter().any(|(o, _)| o.is_none()));
        let mut batch = Batch::default();
        for size in [1, 5, BATCH] {
            let mut outs = vec![vec![0x55; 9]; BATCH];
            let mut outcomes = [None; BATCH];
            for (k, chunk) in packets.chunks(size).enumerate() {
                let refs: Vec<&[u8]> = chunk.iter().map(|p| &p[..]).collect();
                batch.respond(&view, &refs, Transport::Udp, &mut outs, &mut outcomes);
                for (j, (outcome, out)) in outcomes.iter().zip(&outs).take(chunk.len()).enumerate()
                {
                    let (want_outcome, want) = &one[k * size + j];
                    assert_eq!(
                        outcome,
                        want_outcome,
                        "query {} in batches of {size}",
                        k * size + j
                    );
                    if want_outcome.is_some() {
                        assert_eq!(out, want, "query {} in batches of {size}", k * size + j);
                    }
                }
            }
        }
    }
}
