//! Command-line flags (each also read from a `CLUSTERSET_DNS_…` environment variable) and their
//! translation into [`crate::Config`]. Nothing below this module reads the environment.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::Origin;
use crate::cidr::Cidr;
use crate::clock::{parse_duration, parse_duration_or_zero};
use crate::dns::xdp::{self, Coalescing, parse_coalesce};
use crate::dns::{tcp, udp};
use crate::server;
use crate::source::policy::Policy;
use crate::source::{self, Selection, file, kube, linkerd};
use crate::wire::cluster_id;
use crate::zone::build::Limits;
use crate::zone::{self, ZoneError, Zones};

/// Flags that cannot work together, or a value a flag's parser cannot judge alone.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Policy(#[from] source::policy::PolicyError),
    #[error("--linkerd-mirrors and --linkerd-cluster-id need --source linkerd (or mcs,linkerd)")]
    LinkerdFlags,
    #[error("--serviceimport-version needs --source mcs")]
    ImportVersion,
    #[error(transparent)]
    Linkerd(#[from] linkerd::ConfigError),
    #[error("--cluster-id {0:?} is not a cluster id (one or two DNS labels)")]
    BadOwnClusterId(String),
    #[error(transparent)]
    Zone(#[from] ZoneError),
}

/// What `--source` names: which objects are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SourceFlag {
    /// ServiceImports and EndpointSlices.
    Mcs,
    /// Linkerd's federated and mirror Services.
    Linkerd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Authoritative DNS for Kubernetes Multi-Cluster Services: answers
/// <svc>.<ns>.svc.clusterset.local from ServiceImport and EndpointSlice objects.
#[derive(Debug, Parser)]
#[command(
    name = "clusterset-dns",
    version,
    about,
    max_term_width = 100,
    propagate_version = true
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// YAML or JSON file of ServiceImports and EndpointSlices (and, with --source linkerd,
    /// Services), as several documents or a List as `kubectl get -o yaml` prints it. Reloaded when it changes and on SIGHUP. Without it, the
    /// objects are watched in the Kubernetes API.
    #[arg(long, global = true, env = "CLUSTERSET_DNS_FILE", value_name = "PATH", conflicts_with_all = ["kubeconfig", "context", "namespaces", "serviceimport_version"])]
    pub file: Option<PathBuf>,

    /// Kubeconfig for the Kubernetes API; default: KUBECONFIG, ~/.kube/config, or the pod's
    /// service account.
    #[arg(
        long,
        global = true,
        env = "CLUSTERSET_DNS_KUBECONFIG",
        value_name = "PATH"
    )]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use.
    #[arg(
        long,
        global = true,
        env = "CLUSTERSET_DNS_CONTEXT",
        value_name = "NAME"
    )]
    pub context: Option<String>,

    /// Watch only this namespace; repeat (or comma-separate) for several. Default: all.
    #[arg(
        long = "namespace",
        env = "CLUSTERSET_DNS_NAMESPACE",
        global = true,
        value_name = "NS",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,

    /// ServiceImport API version to watch; default: v1beta1 if the API server serves it, else
    /// v1alpha1 (Cilium and Submariner CRDs serve only v1alpha1).
    #[arg(long, global = true, env = "CLUSTERSET_DNS_SERVICEIMPORT_VERSION", value_name = "VERSION", value_parser = ["v1beta1", "v1alpha1"])]
    pub serviceimport_version: Option<String>,

    /// Which objects are read: mcs (ServiceImports and EndpointSlices), linkerd (the
    /// federated and mirror Services of Linkerd's multicluster, 2.17 and later); repeat or
    /// comma-separate for both. When both give a service, the ServiceImport is served.
    #[arg(
        long = "source",
        global = true,
        env = "CLUSTERSET_DNS_SOURCE",
        value_name = "SOURCE",
        value_delimiter = ',',
        default_value = "mcs",
        value_enum
    )]
    pub sources: Vec<SourceFlag>,

    /// With --source linkerd: the cluster id that a Link's hosts are named under
    /// (<host>.<cluster>.<svc>.<ns>.svc.<zone>), as LINK=ID; repeatable. Default: the Link's name.
    #[arg(
        long = "linkerd-cluster-id",
        global = true,
        env = "CLUSTERSET_DNS_LINKERD_CLUSTER_ID",
        value_name = "LINK=ID",
        value_delimiter = ','
    )]
    pub linkerd_cluster_ids: Vec<String>,

    /// With --source linkerd: a service with no federated Service answers the ClusterIPs of
    /// every Link's mirror of it (each only routes through a Linkerd proxy).
    #[arg(long, global = true, env = "CLUSTERSET_DNS_LINKERD_MIRRORS")]
    pub linkerd_mirrors: bool,

    /// This server's own cluster id (one or two DNS labels): answers built from endpoints put
    /// this cluster's first, or only this cluster's as the import asks. Without it, the
    /// ClusterProperty cluster.clusterset.k8s.io (KEP-2149) gives it, from the same source.
    #[arg(
        long,
        global = true,
        env = "CLUSTERSET_DNS_CLUSTER_ID",
        value_name = "ID"
    )]
    pub cluster_id: Option<String>,

    /// How often the file is checked for changes.
    #[arg(long, env = "CLUSTERSET_DNS_FILE_POLL_INTERVAL", value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub file_poll_interval: Duration,

    /// Address for DNS over UDP and TCP.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_LISTEN",
        value_name = "ADDR",
        default_value = "0.0.0.0:1053"
    )]
    pub listen: SocketAddr,

    /// UDP sockets (SO_REUSEPORT), each with its own thread; default: one per CPU.
    #[arg(long, env = "CLUSTERSET_DNS_UDP_WORKERS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub udp_workers: Option<u32>,

    /// Also answer UDP through AF_XDP on this interface (Linux; root or CAP_NET_ADMIN, CAP_BPF
    /// and CAP_NET_RAW): an XDP program hands queries to the listen address and port to the
    /// server before the kernel's IP and UDP layers. Everything else still reaches the sockets.
    #[arg(long, env = "CLUSTERSET_DNS_XDP", value_name = "IFACE")]
    pub xdp: Option<String>,

    /// With --xdp: after answering a receive that did not fill a batch, wait before looking
    /// again, so that queries arriving meanwhile are answered together (as a network card
    /// coalesces interrupts): much less CPU per query when busy, more latency at moderate load
    /// (see README). auto: wait 100us, but only while a queue is busy more than half the time;
    /// 0: never wait; a duration (at most 1ms): wait that long after every such receive.
    #[arg(long, env = "CLUSTERSET_DNS_XDP_COALESCE", value_name = "auto|0|DURATION", default_value = "auto", value_parser = parse_coalesce)]
    pub xdp_coalesce: Coalescing,

    /// Address for the admin HTTP server: /metrics, /health, /ready.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_ADMIN_LISTEN",
        global = true,
        value_name = "ADDR",
        default_value = "0.0.0.0:9153"
    )]
    pub admin_listen: SocketAddr,

    /// Zone to serve; repeat the flag (or separate with commas) for several.
    #[arg(
        long = "zone",
        env = "CLUSTERSET_DNS_ZONE",
        global = true,
        value_name = "ZONE",
        default_value = "clusterset.local",
        value_delimiter = ','
    )]
    pub zones: Vec<String>,

    /// TTL in seconds of every record (except dns-version, 28800); negative answers use at most 300.
    #[arg(long, global = true, env = "CLUSTERSET_DNS_TTL", value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=2_147_483_647))]
    pub ttl: u32,

    /// Address of ns.dns.<zone>, the name server the apex NS record names (glue); repeatable.
    #[arg(
        long = "ns-address",
        env = "CLUSTERSET_DNS_NS_ADDRESS",
        global = true,
        value_name = "IP",
        value_delimiter = ','
    )]
    pub ns_addresses: Vec<IpAddr>,

    /// Close a TCP connection that sends no query for this long.
    #[arg(long, env = "CLUSTERSET_DNS_TCP_IDLE_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub tcp_idle_timeout: Duration,

    /// Most TCP connections open at once; a new one beyond it replaces the connection idle longest.
    #[arg(long, env = "CLUSTERSET_DNS_TCP_MAX_CONNECTIONS", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub tcp_max_connections: u32,

    /// Threads serving TCP connections (each new connection goes to the next); default: one
    /// per CPU.
    #[arg(long, env = "CLUSTERSET_DNS_TCP_WORKERS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub tcp_workers: Option<u32>,

    /// After answering, a TCP worker may wait before it looks for more, so that queries
    /// arriving meanwhile on any of its connections are answered in one wake-up: much less CPU
    /// per query at thousands of queries a second, a little more latency (see README). auto:
    /// only while a worker answers 4,000 queries a second or more, and then as long as five take
    /// to arrive (1ms at 5,000 q/s, 250us at 20,000); 0: never wait; a duration (at most 1ms):
    /// wait that long after every wake-up that answered something.
    #[arg(long, env = "CLUSTERSET_DNS_TCP_COALESCE", value_name = "auto|0|DURATION", default_value = "auto", value_parser = tcp::parse_coalesce)]
    pub tcp_coalesce: Coalescing,

    /// After SIGTERM or SIGINT, keep answering for this long while /ready answers 503, so the
    /// endpoint is withdrawn before the server stops (CoreDNS's `health { lameduck }`); 0: stop
    /// at once. A second signal ends it at once.
    #[arg(long, env = "CLUSTERSET_DNS_LAMEDUCK", value_name = "DURATION", default_value = "5s", value_parser = parse_duration_or_zero)]
    pub lameduck: Duration,

    /// How long in-flight TCP queries get to finish once the server stops answering.
    #[arg(long, env = "CLUSTERSET_DNS_SHUTDOWN_GRACE", value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Clients allowed zone transfers (AXFR; IXFR gets the full zone) over TCP, as addresses or
    /// CIDR blocks; repeatable. Default: none, every transfer is refused.
    #[arg(
        long = "allow-transfer",
        env = "CLUSTERSET_DNS_ALLOW_TRANSFER",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub allow_transfer: Vec<Cidr>,

    /// Never answer addresses in these blocks (say, the node network), on top of the addresses
    /// no client may be sent to (loopback, link-local and metadata, multicast, ...); repeatable.
    #[arg(
        long = "deny-cidr",
        global = true,
        env = "CLUSTERSET_DNS_DENY_CIDR",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub deny_cidr: Vec<Cidr>,

    /// Answer only addresses inside these blocks (the cluster set's pod and service ranges);
    /// repeatable. Default: any address not refused.
    #[arg(
        long = "allow-cidr",
        global = true,
        env = "CLUSTERSET_DNS_ALLOW_CIDR",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub allow_cidr: Vec<Cidr>,

    /// ServiceImports and EndpointSlices in these namespaces are not served; an empty value
    /// (--exclude-namespace=) serves every namespace.
    #[arg(
        long = "exclude-namespace",
        global = true,
        env = "CLUSTERSET_DNS_EXCLUDE_NAMESPACE",
        value_name = "NS",
        value_delimiter = ',',
        default_value = "kube-system,kube-public,kube-node-lease"
    )]
    pub exclude_namespaces: Vec<String>,

    /// A service whose slices hold more ready endpoints is refused: a new one is not served, a
    /// served one keeps its last accepted answers (logged once, counted). 0: no limit.
    #[arg(long, global = true, env = "CLUSTERSET_DNS_MAX_ENDPOINTS_PER_SERVICE", value_name = "N", default_value_t = Limits::DEFAULT.endpoints_per_service)]
    pub max_endpoints_per_service: usize,

    /// Most DNS names the services may own in all served zones together; a service that would
    /// go beyond it is refused until there is room, and served ones keep their answers. 0: no
    /// limit.
    #[arg(long, global = true, env = "CLUSTERSET_DNS_MAX_ZONE_NAMES", value_name = "N", default_value_t = Limits::DEFAULT.zone_names)]
    pub max_zone_names: usize,

    /// Log every query at info (client, name, type, rcode, size, duration); without it, query
    /// lines appear only at --log-level debug.
    #[arg(long, env = "CLUSTERSET_DNS_LOG_QUERIES")]
    pub log_queries: bool,

    /// Log format.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_LOG_FORMAT",
        global = true,
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// Most detailed log level; per-query lines appear at debug.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_LOG_LEVEL",
        global = true,
        value_enum,
        default_value = "info"
    )]
    pub log_level: LogLevel,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the zone that would be served, in RFC 1035 master-file form, sorted, then exit:
    /// loaded from --file, or listed from the Kubernetes API with the same flags as the server.
    Zone {
        /// How long to wait for the Kubernetes API's first full list.
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// Run as the bridge between the MCS API and Linkerd's multicluster (its own Deployment):
    /// each ServiceExport gets the Service the label Linkerd's service mirror exports by, and
    /// conditions that say how the export went; Linkerd's federated Services and mirrors become
    /// ServiceImports. Uses --kubeconfig, --context, --cluster-id, --linkerd-cluster-id,
    /// --admin-listen, --log-format and --log-level.
    LinkerdBridge {
        /// Which halves run: export (ServiceExports to Linkerd's labels and the exports'
        /// conditions), import (Linkerd's mirrors and federated Services to ServiceImports and
        /// EndpointSlices), or both.
        #[arg(
            long,
            value_enum,
            value_name = "HALF",
            value_delimiter = ',',
            default_value = "export,import"
        )]
        halves: Vec<Half>,
        /// How a ServiceExport without the annotation linkerd-bridge.clusterset-dns.io/mode
        /// is exported (a headless Service is never federated: remote-discovery instead).
        #[arg(long, value_enum, value_name = "MODE", default_value = "federated")]
        default_mode: crate::bridge::export::Mode,
        /// Every export and import is brought up to date this often, whether or not anything
        /// changed.
        #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
        resync: Duration,
        /// Namespace of the Lease the replicas share (one writes at a time).
        #[arg(
            long,
            env = "POD_NAMESPACE",
            value_name = "NAMESPACE",
            default_value = "clusterset-dns"
        )]
        lease_namespace: String,
        /// Name of that Lease.
        #[arg(
            long,
            value_name = "NAME",
            default_value = "clusterset-dns-linkerd-bridge"
        )]
        lease_name: String,
        /// This replica's name in the Lease; default: the pod's name (POD_NAME), else the host
        /// name, with the process id and start time.
        #[arg(long, env = "POD_NAME", value_name = "NAME")]
        lease_identity: Option<String>,
        /// How long a replica's hold on the Lease lasts unrenewed: the longest another waits to
        /// take over from one that died (one that stops gives it up at once).
        #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_lease_duration)]
        lease_duration: Duration,
    },
}

/// A half of the linkerd-bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Half {
    /// ServiceExports in, Linkerd's labels and the exports' conditions out.
    Export,
    /// Linkerd's federated Services and mirrors in, ServiceImports and EndpointSlices out.
    Import,
}

/// A Lease duration: whole seconds (the Lease holds seconds), at least 2 (renewed five times
/// within it, no more often than every half second).
fn parse_lease_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(2) || d.subsec_nanos() != 0 {
        return Err(format!(
            "{s}: a Lease lasts whole seconds, at least 2 (replicas renew it five times within)"
        ));
    }
    Ok(d)
}

fn unlimited_if_zero(n: usize) -> usize {
    if n == 0 { usize::MAX } else { n }
}

/// The top-level flags `linkerd-bridge` reads; any other given on its command line is an error.
const BRIDGE_READS: &[&str] = &[
    "kubeconfig",
    "context",
    "cluster_id",
    "linkerd_cluster_ids",
    "admin_listen",
    "log_format",
    "log_level",
];

impl Args {
    /// Parses a command line as `Args::try_parse_from` does, and refuses flags of the DNS
    /// server given to `linkerd-bridge` (`--file`, `--namespace`, `--listen`, …): the bridge
    /// would ignore them, and an operator who passes one expects it to do something.
    pub fn try_parse_checked_from<I, T>(args: I) -> Result<Args, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
        let mut cmd = Args::command();
        let matches = cmd.try_get_matches_from_mut(args)?;
        let parsed = Args::from_arg_matches(&matches)?;
        if let Some(("linkerd-bridge", sub)) = matches.subcommand() {
            let given = |id: &str, global: bool| {
                matches.value_source(id) == Some(ValueSource::CommandLine)
                    || (global && sub.value_source(id) == Some(ValueSource::CommandLine))
            };
            let ignored: Vec<String> = cmd
                .get_arguments()
                .filter(|a| !BRIDGE_READS.contains(&a.get_id().as_str()))
                .filter(|a| given(a.get_id().as_str(), a.is_global_set()))
                .map(|a| format!("--{}", a.get_long().unwrap_or(a.get_id().as_str())))
                .collect();
            if !ignored.is_empty() {
                return Err(cmd.error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "linkerd-bridge does not read {}: it takes --kubeconfig, --context, \
                         --cluster-id, --linkerd-cluster-id, --admin-listen, --log-format, \
                         --log-level and its own flags",
                        ignored.join(", ")
                    ),
                ));
            }
        }
        Ok(parsed)
    }

    /// The bridge's configuration, for `linkerd-bridge`.
    pub fn bridge(&self) -> Option<Result<crate::bridge::Config, ConfigError>> {
        let Some(Command::LinkerdBridge {
            ref halves,
            default_mode,
            resync,
            ref lease_namespace,
            ref lease_name,
            ref lease_identity,
            lease_duration,
        }) = self.command
        else {
            return None;
        };
        let identity = lease_identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "linkerd-bridge".into());
            let started = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            format!("{host}-{}-{started:08x}", std::process::id())
        });
        let naming = match self.bridge_naming() {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(crate::bridge::Config {
            kube: kube::Config {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
                namespaces: self.namespaces.clone(),
                import_version: None,
            },
            export: halves
                .contains(&Half::Export)
                .then_some(crate::bridge::ExportSettings {
                    default_mode,
                    resync,
                }),
            import: halves
                .contains(&Half::Import)
                .then_some(crate::bridge::ImportSettings {
                    naming: naming.clone(),
                    resync,
                }),
            cluster_id: naming.own.clone(),
            admin: self.admin_listen,
            lease: crate::bridge::lease::Config {
                namespace: lease_namespace.clone(),
                name: lease_name.clone(),
                identity,
                duration: lease_duration,
                renew: (lease_duration / 5).max(Duration::from_millis(500)),
            },
        }))
    }

    /// How the bridge's import half names clusters: `--linkerd-cluster-id` for Links,
    /// `--cluster-id` for this cluster.
    fn bridge_naming(&self) -> Result<crate::bridge::import::Naming, ConfigError> {
        let linkerd = linkerd::Config::from_flags(&self.linkerd_cluster_ids, false)?;
        let own = match &self.cluster_id {
            Some(given) => {
                Some(cluster_id(given).ok_or_else(|| ConfigError::BadOwnClusterId(given.clone()))?)
            }
            None => None,
        };
        Ok(crate::bridge::import::Naming {
            cluster_ids: linkerd.cluster_ids,
            own,
        })
    }

    /// `--udp-workers`, or the CPUs this process may run on.
    pub fn udp_workers(&self) -> usize {
        self.udp_workers.map_or_else(cpus, |n| n as usize)
    }

    /// `--tcp-workers`, or the CPUs this process may run on.
    pub fn tcp_workers(&self) -> usize {
        self.tcp_workers.map_or_else(cpus, |n| n as usize)
    }

    /// `--deny-cidr`, `--allow-cidr` and `--exclude-namespace`, checked against `--namespace`.
    fn policy(&self) -> Result<Policy, ConfigError> {
        Ok(Policy::from_flags(
            &self.deny_cidr,
            &self.allow_cidr,
            &self.exclude_namespaces,
            &self.namespaces,
        )?)
    }

    /// `--source` and the Linkerd flags, checked.
    fn selection(&self) -> Result<Selection, ConfigError> {
        let mcs = self.sources.contains(&SourceFlag::Mcs);
        let linkerd = self.sources.contains(&SourceFlag::Linkerd);
        if !linkerd && (self.linkerd_mirrors || !self.linkerd_cluster_ids.is_empty()) {
            return Err(ConfigError::LinkerdFlags);
        }
        if !mcs && self.serviceimport_version.is_some() {
            return Err(ConfigError::ImportVersion);
        }
        let linkerd = match linkerd {
            true => Some(linkerd::Config::from_flags(
                &self.linkerd_cluster_ids,
                self.linkerd_mirrors,
            )?),
            false => None,
        };
        let own = match &self.cluster_id {
            None => None,
            Some(given) => {
                Some(cluster_id(given).ok_or_else(|| ConfigError::BadOwnClusterId(given.clone()))?)
            }
        };
        Ok(Selection {
            mcs,
            linkerd,
            cluster_id: own,
        })
    }

    pub fn config(&self) -> Result<crate::Config, ConfigError> {
        let policy = self.policy()?;
        let selection = self.selection()?;
        let origin = match &self.file {
            Some(path) => Origin::File(file::Config {
                path: path.clone(),
                poll: self.file_poll_interval,
            }),
            None => Origin::Kube(kube::Config {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
                namespaces: self.namespaces.clone(),
                import_version: self.serviceimport_version.clone(),
            }),
        };
        Ok(crate::Config {
            zone: zone::Config {
                zones: Zones::parse(&self.zones)?,
                ttl: self.ttl,
                ns_addresses: self.ns_addresses.clone(),
                limits: Limits {
                    endpoints_per_service: unlimited_if_zero(self.max_endpoints_per_service),
                    zone_names: unlimited_if_zero(self.max_zone_names),
                },
            },
            source: source::Config { policy, selection },
            origin,
            server: server::Config {
                listen: self.listen,
                admin: self.admin_listen,
                udp: udp::Config {
                    workers: self.udp_workers(),
                },
                xdp: self.xdp.as_ref().map(|interface| xdp::Config {
                    interface: interface.clone(),
                    coalesce: self.xdp_coalesce,
                }),
                tcp: tcp::Config {
                    idle_timeout: self.tcp_idle_timeout,
                    max_connections: self.tcp_max_connections as usize,
                    allow_transfer: self.allow_transfer.clone(),
                    workers: self.tcp_workers(),
                    coalesce: self.tcp_coalesce,
                },
                query_log: self.log_queries,
                grace: self.shutdown_grace,
                lameduck: self.lameduck,
            },
        })
    }
}

/// The CPUs this process may run on.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_refuses_the_dns_servers_flags() {
        let ok = Args::try_parse_checked_from([
            "clusterset-dns",
            "--log-level",
            "debug",
            "linkerd-bridge",
            "--cluster-id",
            "east",
            "--linkerd-cluster-id",
            "west=west.eu",
            "--kubeconfig",
            "k",
            "--halves",
            "import",
        ]);
        assert!(ok.is_ok(), "{ok:?}");
        for (given, flag) in [
            (
                &["clusterset-dns", "--file", "f.yaml", "linkerd-bridge"][..],
                "--file",
            ),
            (
                &["clusterset-dns", "linkerd-bridge", "--file", "f.yaml"][..],
                "--file",
            ),
            (
                &["clusterset-dns", "linkerd-bridge", "--namespace", "shop"][..],
                "--namespace",
            ),
            (
                &[
                    "clusterset-dns",
                    "--listen",
                    "127.0.0.1:53",
                    "linkerd-bridge",
                ][..],
                "--listen",
            ),
        ] {
            let e = Args::try_parse_checked_from(given).unwrap_err().to_string();
            assert!(
                e.contains(&format!("linkerd-bridge does not read {flag}:")),
                "{given:?}: {e}"
            );
        }
        // The DNS server itself takes them, as before.
        assert!(Args::try_parse_checked_from(["clusterset-dns", "--file", "f.yaml"]).is_ok());
    }

    #[test]
    fn xdp_coalescing_is_adaptive_by_default() {
        let a = Args::try_parse_from(["clusterset-dns", "--file", "f"]).unwrap();
        assert_eq!(a.xdp_coalesce, Coalescing::Adaptive(xdp::ADAPTIVE_WAIT));
    }

    #[test]
    fn flags_parse_and_check() {
        let a = Args::try_parse_from([
            "clusterset-dns",
            "--file",
            "f.yaml",
            "--zone",
            "a.local,b.local",
            "--ttl",
            "30",
        ])
        .unwrap();
        let c = a.config().unwrap();
        assert_eq!(c.zone.zones, Zones::parse(&["a.local", "b.local"]).unwrap());
        assert_eq!(c.zone.ttl, 30);
        let a =
            Args::try_parse_from(["clusterset-dns", "--file", "f", "--zone", "bad..zone"]).unwrap();
        let e = a.config().unwrap_err();
        assert!(matches!(e, ConfigError::Zone(ZoneError::BadZone(_))), "{e}");
        assert!(e.to_string().contains("bad..zone"));
        let a = Args::try_parse_from(["clusterset-dns", "--namespace", "a,b"]).unwrap();
        assert!(
            matches!(a.config().unwrap().origin, Origin::Kube(k) if k.namespaces == ["a", "b"])
        );
        assert!(Args::try_parse_from(["clusterset-dns", "--file", "f", "--context", "c"]).is_err());
        assert!(Args::try_parse_from(["clusterset-dns", "--serviceimport-version", "v2"]).is_err());
        assert!(Args::try_parse_from(["clusterset-dns", "--listen", "nowhere"]).is_err());
        // The trust boundary's flags.
        let policy = |args: &[&str]| {
            let mut all = vec!["clusterset-dns"];
            all.extend_from_slice(args);
            Args::try_parse_from(all).unwrap().policy()
        };
        assert_eq!(policy(&[]).unwrap(), Policy::default());
        assert!(
            policy(&["--exclude-namespace="])
                .unwrap()
                .exclude_namespaces
                .is_empty()
        );
        let p = policy(&[
            "--deny-cidr",
            "198.18.0.0/15,fd00::/8",
            "--allow-cidr",
            "10.0.0.0/8",
            "--exclude-namespace",
            "a,b",
        ])
        .unwrap();
        assert_eq!((p.deny.len(), p.allow.len()), (2, 1));
        assert_eq!(p.exclude_namespaces, ["a", "b"]);
        let e = policy(&["--namespace", "kube-system"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("\"kube-system\" is given to --namespace but excluded"),
            "{e}"
        );
        assert!(policy(&["--namespace", "kube-system", "--exclude-namespace="]).is_ok());
        assert!(
            policy(&["--exclude-namespace", "Kube_System"])
                .unwrap_err()
                .to_string()
                .contains("Kube_System")
        );
        assert!(Args::try_parse_from(["clusterset-dns", "--deny-cidr", "10.0.0.0/40"]).is_err());
    }

    #[test]
    fn sources_and_linkerd_flags() {
        let selection = |args: &[&str]| {
            let mut all = vec!["clusterset-dns"];
            all.extend_from_slice(args);
            Args::try_parse_from(all)
                .map_err(|e| e.to_string())
                .and_then(|a| a.selection().map_err(|e| e.to_string()))
        };
        assert_eq!(selection(&[]).unwrap(), Selection::default());
        // The own cluster id: one or two labels, lower-cased; anything else stops start-up.
        let own = selection(&["--cluster-id", "Prod.EU"]).unwrap();
        assert_eq!(own.cluster_id.as_deref(), Some("prod.eu"));
        for bad in ["a.b.c", "x-", "", "under_score"] {
            let arg = format!("--cluster-id={bad}");
            let e = selection(&[&arg]).unwrap_err();
            assert!(
                e.contains("--cluster-id") && e.contains("not a cluster id"),
                "{e}"
            );
        }
        let both = selection(&["--source", "mcs,linkerd", "--linkerd-mirrors"]).unwrap();
        assert!(both.mcs && both.linkerd.as_ref().unwrap().mirrors);
        // Repeated, and the ids lower-cased.
        let s = selection(&[
            "--source=linkerd",
            "--linkerd-cluster-id",
            "east=East.Prod,west=w",
            "--linkerd-cluster-id=north=n",
        ])
        .unwrap();
        assert!(!s.mcs);
        let ids = s.linkerd.unwrap().cluster_ids;
        assert_eq!(ids["east"], "east.prod");
        assert_eq!(ids.len(), 3);
        for (args, says) in [
            (&["--source", "istio"][..], "istio"),
            (&["--linkerd-mirrors"][..], "need --source linkerd"),
            (
                &["--source=linkerd", "--linkerd-cluster-id", "east"][..],
                "LINK=ID",
            ),
            (
                &["--source=linkerd", "--linkerd-cluster-id", "=x"][..],
                "names no Link",
            ),
            (
                &["--source=linkerd", "--linkerd-cluster-id", "e=a.b.c"][..],
                "one or two DNS labels",
            ),
            (
                &["--source=linkerd", "--linkerd-cluster-id", "e=a,e=b"][..],
                "twice",
            ),
            (
                &["--source=linkerd", "--serviceimport-version=v1beta1"][..],
                "needs --source mcs",
            ),
        ] {
            let e = selection(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
