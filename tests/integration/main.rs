//! The integration tests, one binary (a link, and `common` compiled once, instead of one of
//! each per file). Each module is what was its own binary, and its tests still run alone
//! beside other modules' ([`common::module`]): the heavy ones (a real cluster, XDP, images,
//! API servers) were written for a machine that runs one file's tests at a time.

mod common;

// These make network namespaces, sockets and rlimits of their own through libc.
#[allow(unsafe_code)]
mod abuse;
mod behaviour;
mod binary;
mod chart;
mod cluster;
mod clusterset;
mod clusterset_bridge;
mod compat;
mod deploy;
mod differential;
mod forwarding;
mod fuzz_corpus;
mod gateway;
mod harness;
mod image;
mod kube_churn;
mod kube_flood;
mod kube_source;
#[allow(unsafe_code)]
mod lameduck;
mod linkerd_bridge;
mod linkerd_bridge_conflicts;
mod linkerd_bridge_endpoints;
mod linkerd_bridge_faults;
mod linkerd_bridge_import;
mod linkerd_bridge_limit;
mod linkerd_source;
mod locality;
mod mcs_status;
mod monitoring;
mod node_local_dns;
mod ops;
mod protocol;
mod reload;
mod soak;
#[allow(unsafe_code)]
mod xdp;
