//! What every serving path does after answering a query: count it under CoreDNS's metric names
//! and log it (at info with `--log-queries`, else at debug).

use std::net::SocketAddr;

use super::query::u16_at;
use super::{Outcome, Transport};
use crate::wire::WireName;

/// The question name of a response (or query) for logs, read only when formatted; `-` when
/// there is no question.
pub struct QName<'a>(pub &'a [u8]);

impl std::fmt::Display for QName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get(12..) {
            Some(name) if u16_at(self.0, 4).unwrap_or(0) > 0 => WireName(name).fmt(f),
            _ => f.write_str("-"),
        }
    }
}

/// Where a serving worker logs the queries it answers: at info with the query log on
/// (`--log-queries`), else at debug; decided once, so a worker with no query lines enabled
/// skips them with one test of a flag.
#[derive(Debug, Clone, Copy)]
pub struct QueryLog {
    /// `--log-queries`: lines at info.
    info: bool,
    /// Whether any line is written (the query log, or debug lines enabled).
    any: bool,
}

impl QueryLog {
    pub fn new(query_log: bool) -> Self {
        QueryLog {
            info: query_log,
            any: query_log
                || tracing::enabled!(target: "clusterset_dns::query", tracing::Level::DEBUG),
        }
    }

    /// Logs one answered query, if query lines are wanted.
    pub fn log(
        self,
        client: SocketAddr,
        transport: Transport,
        response: &[u8],
        outcome: &Outcome,
        took: std::time::Duration,
    ) {
        if !self.any {
            return;
        }
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    target: "clusterset_dns::query",
                    %client,
                    proto = if transport == Transport::Tcp { "tcp" } else { "udp" },
                    name = %QName(response),
                    qtype = crate::metrics::type_label(outcome.qtype),
                    rcode = %crate::metrics::rcode_label(outcome.rcode),
                    tc = outcome.truncated,
                    size = response.len(),
                    duration_us = took.as_micros() as u64,
                    "query"
                )
            };
        }
        if self.info {
            line!(info);
        } else {
            line!(debug);
        }
    }
}

/// Counts one answered query and logs it (as `log` says), alike for the UDP, XDP and TCP paths.
/// `response` is its messages: one, or a zone transfer's several (the log names the first).
#[allow(clippy::too_many_arguments)]
pub(crate) fn account(
    counters: &crate::metrics::QueryCounters,
    log: QueryLog,
    transport: Transport,
    client: SocketAddr,
    outcome: &Outcome,
    request_len: usize,
    response: &[Vec<u8>],
    took: std::time::Duration,
) {
    counters.count(crate::metrics::Answered {
        zone: outcome.apex,
        qtype: outcome.qtype,
        rcode: outcome.rcode,
        dnssec_ok: outcome.dnssec_ok,
        tcp: transport == Transport::Tcp,
        v6: client.is_ipv6(),
        request_len,
        response_len: response.iter().map(Vec::len).sum(),
        took,
    });
    log.log(client, transport, &response[0], outcome, took);
}
