//! Command-line flags (each also read from a `CLUSTERSET_DNS_…` environment variable) and their
//! translation into [`crate::Config`]. Nothing below this module reads the environment.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::dns::tcp;
use crate::dns::transfer::Cidr;
use crate::dns::xdp::Coalescing;
use crate::server;
use crate::source::{file, kube};

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
#[command(name = "clusterset-dns", version, about, max_term_width = 100)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// YAML or JSON file of ServiceImports and EndpointSlices (several documents, or a List as
    /// `kubectl get -o yaml` prints). Reloaded when it changes and on SIGHUP. Without it, the
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

    /// How long in-flight queries get to finish after SIGTERM or SIGINT.
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
}

/// How long an adaptive XDP worker waits (`--xdp-coalesce auto`).
pub const ADAPTIVE_WAIT: Duration = Duration::from_micros(100);

/// `--xdp-coalesce`: `auto`, `0` (off) or a duration up to 1 ms, such as `50us`.
pub fn parse_coalesce(s: &str) -> Result<Coalescing, String> {
    match s.trim() {
        "auto" => return Ok(Coalescing::Adaptive(ADAPTIVE_WAIT)),
        "0" => return Ok(Coalescing::Off),
        _ => {}
    }
    let d = parse_duration(s).map_err(|e| format!("{e}, or auto, or 0"))?;
    if d > Duration::from_millis(1) {
        return Err(format!("{s:?} is more than 1ms"));
    }
    Ok(Coalescing::Always(d))
}

/// `50us`, `250ms`, `5s`, `2m`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 5s or 2m"))?;
    let d = match unit {
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        _ => return Err(format!("{s:?} has an unknown unit (use us, ms, s or m)")),
    };
    if d.is_zero() {
        return Err("a duration must be above zero".into());
    }
    Ok(d)
}

impl Args {
    /// `--udp-workers`, or the CPUs this process may run on.
    pub fn udp_workers(&self) -> usize {
        match self.udp_workers {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    pub fn config(&self) -> Result<crate::Config, String> {
        crate::apexes(&self.zones).map_err(|e| e.to_string())?;
        let source = match &self.file {
            Some(path) => crate::SourceConfig::File(file::Config {
                path: path.clone(),
                poll: self.file_poll_interval,
            }),
            None => crate::SourceConfig::Kube(kube::Config {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
                namespaces: self.namespaces.clone(),
                import_version: self.serviceimport_version.clone(),
            }),
        };
        Ok(crate::Config {
            zones: self.zones.clone(),
            ttl: self.ttl,
            ns_addresses: self.ns_addresses.clone(),
            server: server::Config {
                tcp: tcp::Config {
                    idle_timeout: self.tcp_idle_timeout,
                    max_connections: self.tcp_max_connections as usize,
                    allow_transfer: self.allow_transfer.clone(),
                    query_log: self.log_queries,
                },
                grace: self.shutdown_grace,
            },
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5h").unwrap_err().contains("unit"));
        assert!(parse_duration("x").is_err());
        assert_eq!(parse_duration("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_coalesce("0"), Ok(Coalescing::Off));
        assert_eq!(
            parse_coalesce("1ms"),
            Ok(Coalescing::Always(Duration::from_millis(1)))
        );
        assert_eq!(
            parse_coalesce("auto"),
            Ok(Coalescing::Adaptive(Duration::from_micros(100)))
        );
        assert!(parse_coalesce("2ms").unwrap_err().contains("1ms"));
        assert!(parse_coalesce("sometimes").unwrap_err().contains("auto"));
        let a = Args::try_parse_from(["clusterset-dns", "--file", "f"]).unwrap();
        assert_eq!(a.xdp_coalesce, Coalescing::Adaptive(ADAPTIVE_WAIT));
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
        assert_eq!(c.zones, ["a.local", "b.local"]);
        assert_eq!(c.ttl, 30);
        let a =
            Args::try_parse_from(["clusterset-dns", "--file", "f", "--zone", "bad..zone"]).unwrap();
        assert!(a.config().unwrap_err().contains("bad..zone"));
        let a = Args::try_parse_from(["clusterset-dns", "--namespace", "a,b"]).unwrap();
        assert!(
            matches!(a.config().unwrap().source, crate::SourceConfig::Kube(k) if k.namespaces == ["a", "b"])
        );
        assert!(Args::try_parse_from(["clusterset-dns", "--file", "f", "--context", "c"]).is_err());
        assert!(Args::try_parse_from(["clusterset-dns", "--serviceimport-version", "v2"]).is_err());
        assert!(Args::try_parse_from(["clusterset-dns", "--listen", "nowhere"]).is_err());
    }
}
