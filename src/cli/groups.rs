//! The groups of flags, each a [`clap::Args`] struct with its help heading, that the commands
//! of [`super::Args`] flatten as they read them.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use crate::bridge::export::Mode;
use crate::cidr::Cidr;
use crate::clock::{parse_duration, parse_duration_or_zero};
use crate::dns::tcp;
use crate::dns::xdp::{Coalescing, parse_coalesce};
use crate::zone::build::Limits;

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

/// How the Kubernetes API is reached.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Kubernetes API")]
pub struct Kube {
    /// Kubeconfig for the Kubernetes API; default: KUBECONFIG, ~/.kube/config, or the pod's
    /// service account.
    #[arg(long, env = "CLUSTERSET_DNS_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use.
    #[arg(long, env = "CLUSTERSET_DNS_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,
}

/// Which cluster this is, and how linked clusters are named.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Cluster")]
pub struct Cluster {
    /// This cluster's id (one or two DNS labels): the DNS server puts this cluster's endpoints
    /// first (or answers only them, as the import asks); the bridge names this cluster's
    /// exports by it. Without it, the ClusterProperty cluster.clusterset.k8s.io (KEP-2149) gives
    /// it.
    #[arg(long, env = "CLUSTERSET_DNS_CLUSTER_ID", value_name = "ID")]
    pub cluster_id: Option<String>,

    /// The cluster id of a Link's target cluster, as LINK=ID, where it differs from the Link's
    /// target cluster name; repeatable. The DNS server (with --source linkerd) names the Link's
    /// hosts under it (<host>.<cluster>.<svc>.<ns>.svc.<zone>); the bridge, the clusters of
    /// its imports. Default: the name.
    #[arg(
        long = "linkerd-cluster-id",
        env = "CLUSTERSET_DNS_LINKERD_CLUSTER_ID",
        value_name = "LINK=ID",
        value_delimiter = ','
    )]
    pub linkerd_cluster_ids: Vec<String>,
}

/// Where the objects come from, and which are read.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Source")]
pub struct Source {
    /// YAML or JSON file of ServiceImports and EndpointSlices (and, with --source linkerd,
    /// Services), as several documents or a List as `kubectl get -o yaml` prints it. Reloaded
    /// when it changes and on SIGHUP. Without it, the objects are watched in the Kubernetes API.
    #[arg(long, env = "CLUSTERSET_DNS_FILE", value_name = "PATH", conflicts_with_all = ["kubeconfig", "context", "namespaces", "serviceimport_version"])]
    pub file: Option<PathBuf>,

    /// Watch only this namespace; repeat (or comma-separate) for several. Default: all.
    #[arg(
        long = "namespace",
        env = "CLUSTERSET_DNS_NAMESPACE",
        value_name = "NS",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,

    /// ServiceImport API version to watch; default: v1beta1 if the API server serves it, else
    /// v1alpha1 (Cilium and Submariner CRDs serve only v1alpha1).
    #[arg(long, env = "CLUSTERSET_DNS_SERVICEIMPORT_VERSION", value_name = "VERSION", value_parser = ["v1beta1", "v1alpha1"])]
    pub serviceimport_version: Option<String>,

    /// Which objects are read: mcs (ServiceImports and EndpointSlices), linkerd (the
    /// federated and mirror Services of Linkerd's multicluster, 2.17 and later); repeat or
    /// comma-separate for both. When both give a service, the ServiceImport is served.
    #[arg(
        long = "source",
        env = "CLUSTERSET_DNS_SOURCE",
        value_name = "SOURCE",
        value_delimiter = ',',
        default_value = "mcs",
        value_enum
    )]
    pub sources: Vec<SourceFlag>,

    /// With --source linkerd: a service with no federated Service answers the ClusterIPs of
    /// every Link's mirror of it (each only routes through a Linkerd proxy).
    #[arg(long, env = "CLUSTERSET_DNS_LINKERD_MIRRORS")]
    pub linkerd_mirrors: bool,

    /// ServiceImports and EndpointSlices in these namespaces are not served; an empty value
    /// (--exclude-namespace=) serves every namespace.
    #[arg(
        long = "exclude-namespace",
        env = "CLUSTERSET_DNS_EXCLUDE_NAMESPACE",
        value_name = "NS",
        value_delimiter = ',',
        default_value = "kube-system,kube-public,kube-node-lease"
    )]
    pub exclude_namespaces: Vec<String>,

    #[command(flatten)]
    pub kube: Kube,

    #[command(flatten)]
    pub cluster: Cluster,
}

/// What the zone holds and answers.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Zone")]
pub struct ZoneFlags {
    /// Zone to serve; repeat the flag (or separate with commas) for several.
    #[arg(
        long = "zone",
        env = "CLUSTERSET_DNS_ZONE",
        value_name = "ZONE",
        default_value = "clusterset.local",
        value_delimiter = ','
    )]
    pub zones: Vec<String>,

    /// TTL in seconds of every record (except dns-version, 28800); negative answers use at most 300.
    #[arg(long, env = "CLUSTERSET_DNS_TTL", value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=2_147_483_647))]
    pub ttl: u32,

    /// Address of ns.dns.<zone>, the name server the apex NS record names (glue); repeatable.
    #[arg(
        long = "ns-address",
        env = "CLUSTERSET_DNS_NS_ADDRESS",
        value_name = "IP",
        value_delimiter = ','
    )]
    pub ns_addresses: Vec<IpAddr>,

    /// Never answer addresses in these blocks (say, the node network), on top of the addresses
    /// no client may be sent to (loopback, link-local and metadata, multicast, ...); repeatable.
    #[arg(
        long = "deny-cidr",
        env = "CLUSTERSET_DNS_DENY_CIDR",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub deny_cidr: Vec<Cidr>,

    /// Answer only addresses inside these blocks (the cluster set's pod and service ranges);
    /// repeatable. Default: any address not refused.
    #[arg(
        long = "allow-cidr",
        env = "CLUSTERSET_DNS_ALLOW_CIDR",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub allow_cidr: Vec<Cidr>,

    /// A service whose slices hold more ready endpoints is refused: a new one is not served, a
    /// served one keeps its last accepted answers (logged once, counted). 0: no limit.
    #[arg(long, env = "CLUSTERSET_DNS_MAX_ENDPOINTS_PER_SERVICE", value_name = "N", default_value_t = Limits::DEFAULT.endpoints_per_service)]
    pub max_endpoints_per_service: usize,

    /// Most DNS names the services may own in all served zones together; a service that would
    /// go beyond it is refused until there is room, and served ones keep their answers. 0: no
    /// limit.
    #[arg(long, env = "CLUSTERSET_DNS_MAX_ZONE_NAMES", value_name = "N", default_value_t = Limits::DEFAULT.zone_names)]
    pub max_zone_names: usize,
}

/// How the zone is served.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Serving")]
pub struct Serving {
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

    /// Clients allowed zone transfers (AXFR; IXFR gets the full zone) over TCP, as addresses or
    /// CIDR blocks; repeatable. Default: none, every transfer is refused.
    #[arg(
        long = "allow-transfer",
        env = "CLUSTERSET_DNS_ALLOW_TRANSFER",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub allow_transfer: Vec<Cidr>,

    /// After SIGTERM or SIGINT, keep answering for this long while /ready answers 503, so the
    /// endpoint is withdrawn before the server stops (CoreDNS's `health { lameduck }`); 0: stop
    /// at once. A second signal ends it at once.
    #[arg(long, env = "CLUSTERSET_DNS_LAMEDUCK", value_name = "DURATION", default_value = "5s", value_parser = parse_duration_or_zero)]
    pub lameduck: Duration,

    /// How long in-flight TCP queries get to finish once the server stops answering.
    #[arg(long, env = "CLUSTERSET_DNS_SHUTDOWN_GRACE", value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// How often the file is checked for changes.
    #[arg(long, env = "CLUSTERSET_DNS_FILE_POLL_INTERVAL", value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub file_poll_interval: Duration,

    /// Log every query at info (client, name, type, rcode, size, duration); without it, query
    /// lines appear only at --log-level debug.
    #[arg(long, env = "CLUSTERSET_DNS_LOG_QUERIES")]
    pub log_queries: bool,
}

/// The admin HTTP server.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Admin")]
pub struct Admin {
    /// Address for the admin HTTP server: /metrics, /health, /ready.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_ADMIN_LISTEN",
        value_name = "ADDR",
        default_value = "0.0.0.0:9153"
    )]
    pub admin_listen: SocketAddr,
}

/// Logging, for every command.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Logging")]
pub struct Log {
    /// Log format.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// Most detailed log level; per-query lines appear at debug.
    #[arg(
        long,
        env = "CLUSTERSET_DNS_LOG_LEVEL",
        value_enum,
        default_value = "info"
    )]
    pub log_level: LogLevel,
}

/// The linkerd-bridge's own flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Bridge")]
pub struct BridgeFlags {
    /// Which halves run: export (ServiceExports to Linkerd's labels and the exports'
    /// conditions), import (every cluster's exports and Linkerd's mirrors and federated
    /// Services to ServiceImports and EndpointSlices), or both.
    #[arg(
        long,
        value_enum,
        value_name = "HALF",
        value_delimiter = ',',
        default_value = "export,import"
    )]
    pub halves: Vec<Half>,
    /// How a ServiceExport without the annotation linkerd-bridge.clusterset-dns.io/mode
    /// is exported (a headless Service is never federated: remote-discovery instead).
    #[arg(long, value_enum, value_name = "MODE", default_value = "federated")]
    pub default_mode: ModeFlag,
    /// Every export and import is brought up to date this often, whether or not anything
    /// changed.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub resync: Duration,
    /// Namespace of the Lease the replicas share (one writes at a time).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "clusterset-dns"
    )]
    pub lease_namespace: String,
    /// Name of that Lease.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "clusterset-dns-linkerd-bridge"
    )]
    pub lease_name: String,
    /// This replica's name in the Lease; default: the pod's name (POD_NAME), else the host
    /// name, with the process id and start time.
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub lease_identity: Option<String>,
    /// How long a replica's hold on the Lease lasts unrenewed: another takes over from one that
    /// died within it and a second (one that stops gives it up at once).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_lease_duration)]
    pub lease_duration: Duration,
    /// Never write an endpoint whose address is in these blocks into an EndpointSlice (say,
    /// the node network), on top of the addresses no client may be sent to (loopback,
    /// link-local and metadata, multicast, ...); repeatable.
    #[arg(
        long = "deny-cidr",
        env = "CLUSTERSET_DNS_DENY_CIDR",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub deny_cidr: Vec<Cidr>,
    /// Write only endpoints whose address is inside these blocks (the cluster set's pod
    /// ranges); repeatable. Default: any address not refused.
    #[arg(
        long = "allow-cidr",
        env = "CLUSTERSET_DNS_ALLOW_CIDR",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub allow_cidr: Vec<Cidr>,
    /// The most objects of each kind (exported Services, their EndpointSlices, per Linkerd
    /// export label) kept of one linked cluster: a cluster that sends more cannot grow the
    /// bridge's memory, and what is beyond it is left out (logged, and counted in
    /// clusterset_dns_bridge_left_out_objects). 0: no limit.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_objects_per_link: usize,
    /// Whether clients outside the mesh reach an import's ClusterSetIP: each of its
    /// EndpointSlices has a twin naming Linkerd's federated Service (`kubernetes.io/
    /// service-name`), so kube-proxy routes that Service's ClusterIP to the exporting clusters'
    /// pods, as the MCS API's controller routes an import's; the import's ports that Service
    /// lacks are carried at the same address by a Service of the bridge's own
    /// (`<svc>-federated-ports`, as `externalIPs`). Off: only meshed clients reach the address
    /// (their proxies route it), and no twin or Service is written.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub route_outside_mesh: bool,
}

/// A half of the linkerd-bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Half {
    /// ServiceExports in, Linkerd's labels and the exports' conditions out.
    Export,
    /// Every cluster's exports and Linkerd's objects in, ServiceImports and EndpointSlices out.
    Import,
}

/// `--default-mode`: how Linkerd exports a Service ([`Mode`], which stays free of the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeFlag {
    /// mirror.linkerd.io/federated=member: one federated Service across the clusters.
    Federated,
    /// mirror.linkerd.io/exported=remote-discovery: a mirror per cluster, no gateway.
    RemoteDiscovery,
    /// mirror.linkerd.io/exported=true: a mirror per cluster, through the Link's gateway.
    Gateway,
}

impl From<ModeFlag> for Mode {
    fn from(m: ModeFlag) -> Mode {
        match m {
            ModeFlag::Federated => Mode::Federated,
            ModeFlag::RemoteDiscovery => Mode::RemoteDiscovery,
            ModeFlag::Gateway => Mode::Gateway,
        }
    }
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
