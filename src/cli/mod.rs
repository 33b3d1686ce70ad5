//! Command-line flags (each also read from a `CLUSTERSET_DNS_…` environment variable) and their
//! translation into [`crate::Config`]. Nothing below this module reads the environment.
//!
//! The flags come in groups, as clap's derive examples group them ([`clap::Args`] structs
//! flattened into each command): Kubernetes API, cluster, source, zone, serving, admin,
//! logging, bridge. Each command takes the groups it reads, so its `--help` shows exactly
//! those, and clap refuses any other: `serve` (what runs without a command), `zone`, and
//! `linkerd-bridge`. A command's flags follow its name.

mod groups;

use std::time::Duration;

use clap::{Parser, Subcommand};

pub use groups::*;

use crate::Origin;
use crate::clock::parse_duration;
use crate::dns::{tcp, udp, xdp};
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

/// Authoritative DNS for Kubernetes Multi-Cluster Services: answers
/// <svc>.<ns>.svc.clusterset.local from ServiceImport and EndpointSlice objects.
#[derive(Debug, Parser)]
#[command(
    name = "clusterset-dns",
    version,
    about,
    max_term_width = 100,
    propagate_version = true,
    args_conflicts_with_subcommands = true
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Without a command, the DNS server runs (as `serve`).
    #[command(flatten)]
    pub serve: Serve,
}

// Parsed once at start: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the zone over DNS (what runs without a command).
    Serve(Serve),
    /// Print the zone that would be served, in RFC 1035 master-file form, sorted, then exit:
    /// loaded from --file, or listed from the Kubernetes API with the same flags as the server.
    Zone(Zone),
    /// Run as the bridge between the MCS API and Linkerd's multicluster (its own Deployment):
    /// each ServiceExport gets the Service the label Linkerd's service mirror exports by, and
    /// conditions that say how the export went; every cluster's exports, and Linkerd's
    /// federated Services and mirrors, become ServiceImports and EndpointSlices.
    LinkerdBridge(Bridge),
}

/// The DNS server.
#[derive(Debug, clap::Args)]
pub struct Serve {
    #[command(flatten)]
    pub source: Source,
    #[command(flatten)]
    pub zone: ZoneFlags,
    #[command(flatten)]
    pub serving: Serving,
    #[command(flatten)]
    pub admin: Admin,
    #[command(flatten)]
    pub log: Log,
}

/// `zone`: the zone printed once.
#[derive(Debug, clap::Args)]
pub struct Zone {
    /// How long to wait for the Kubernetes API's first full list.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub source: Source,
    #[command(flatten)]
    pub zone: ZoneFlags,
    #[command(flatten)]
    pub log: Log,
}

/// `linkerd-bridge`.
#[derive(Debug, clap::Args)]
pub struct Bridge {
    #[command(flatten)]
    pub kube: Kube,
    #[command(flatten)]
    pub cluster: Cluster,
    #[command(flatten)]
    pub admin: Admin,
    #[command(flatten)]
    pub bridge: BridgeFlags,
    #[command(flatten)]
    pub log: Log,
}

fn unlimited_if_zero(n: usize) -> usize {
    if n == 0 { usize::MAX } else { n }
}

/// What a command line asks for.
#[derive(Debug)]
pub enum Run {
    Serve(Box<crate::Config>),
    Zone {
        input: Box<crate::Input>,
        timeout: Duration,
    },
    Bridge(Box<crate::bridge::Config>),
}

impl Args {
    /// The DNS server's flags: `serve`'s, or those given without a command.
    pub fn serve(&self) -> Option<&Serve> {
        match &self.command {
            None => Some(&self.serve),
            Some(Command::Serve(s)) => Some(s),
            Some(_) => None,
        }
    }

    /// How to log, as the command given says.
    pub fn log(&self) -> &Log {
        match &self.command {
            None => &self.serve.log,
            Some(Command::Serve(s)) => &s.log,
            Some(Command::Zone(z)) => &z.log,
            Some(Command::LinkerdBridge(b)) => &b.log,
        }
    }

    /// What the command line asks for, checked.
    pub fn run(&self) -> Result<Run, ConfigError> {
        Ok(match &self.command {
            Some(Command::Zone(z)) => Run::Zone {
                input: Box::new(z.input()?),
                timeout: z.timeout,
            },
            Some(Command::LinkerdBridge(b)) => Run::Bridge(Box::new(b.config()?)),
            Some(Command::Serve(s)) => Run::Serve(Box::new(s.config()?)),
            None => Run::Serve(Box::new(self.serve.config()?)),
        })
    }

    /// The DNS server's configuration (of `serve`, or of no command).
    pub fn config(&self) -> Result<crate::Config, ConfigError> {
        self.serve().unwrap_or(&self.serve).config()
    }
}

impl Bridge {
    /// The bridge's configuration.
    pub fn config(&self) -> Result<crate::bridge::Config, ConfigError> {
        let f = &self.bridge;
        let identity = f.lease_identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "linkerd-bridge".into());
            let started = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            format!("{host}-{}-{started:08x}", std::process::id())
        });
        let naming = self.naming()?;
        Ok(crate::bridge::Config {
            kube: kube::Config {
                kubeconfig: self.kube.kubeconfig.clone(),
                context: self.kube.context.clone(),
                namespaces: Vec::new(),
                import_version: None,
            },
            export: f
                .halves
                .contains(&Half::Export)
                .then_some(crate::bridge::ExportConfig {
                    default_mode: f.default_mode.into(),
                    resync: f.resync,
                }),
            import: f
                .halves
                .contains(&Half::Import)
                .then_some(crate::bridge::ImportConfig {
                    naming: naming.clone(),
                    resync: f.resync,
                    policy: Policy::from_flags(&f.deny_cidr, &f.allow_cidr, &[], &[])?,
                    route_outside_mesh: f.route_outside_mesh,
                }),
            cluster_id: naming.own.clone(),
            max_per_link: unlimited_if_zero(f.max_objects_per_link),
            admin: self.admin.admin_listen,
            lease: crate::bridge::runtime::lease::Config {
                namespace: f.lease_namespace.clone(),
                name: f.lease_name.clone(),
                identity,
                duration: f.lease_duration,
                renew: (f.lease_duration / 5).max(Duration::from_millis(500)),
            },
        })
    }

    /// How the bridge's import half names clusters: `--linkerd-cluster-id` for Links,
    /// `--cluster-id` for this cluster.
    fn naming(&self) -> Result<crate::bridge::import::Naming, ConfigError> {
        let linkerd = linkerd::Config::from_flags(&self.cluster.linkerd_cluster_ids, false)?;
        Ok(crate::bridge::import::Naming {
            cluster_ids: linkerd.cluster_ids,
            own: self.cluster.own()?,
        })
    }
}

impl Cluster {
    /// `--cluster-id`, checked and lower-cased.
    fn own(&self) -> Result<Option<String>, ConfigError> {
        match &self.cluster_id {
            None => Ok(None),
            Some(given) => {
                Ok(Some(cluster_id(given).ok_or_else(|| {
                    ConfigError::BadOwnClusterId(given.clone())
                })?))
            }
        }
    }
}

impl Serving {
    /// `--udp-workers`, or the CPUs this process may run on.
    pub fn udp_workers(&self) -> usize {
        self.udp_workers.map_or_else(cpus, |n| n as usize)
    }

    /// `--tcp-workers`, or the CPUs this process may run on.
    pub fn tcp_workers(&self) -> usize {
        self.tcp_workers.map_or_else(cpus, |n| n as usize)
    }
}

impl Source {
    /// `--deny-cidr`, `--allow-cidr` and `--exclude-namespace`, checked against `--namespace`.
    fn policy(&self, zone: &ZoneFlags) -> Result<Policy, ConfigError> {
        Ok(Policy::from_flags(
            &zone.deny_cidr,
            &zone.allow_cidr,
            &self.exclude_namespaces,
            &self.namespaces,
        )?)
    }

    /// `--source` and the Linkerd flags, checked.
    fn selection(&self) -> Result<Selection, ConfigError> {
        let mcs = self.sources.contains(&SourceFlag::Mcs);
        let linkerd = self.sources.contains(&SourceFlag::Linkerd);
        let ids = &self.cluster.linkerd_cluster_ids;
        if !linkerd && (self.linkerd_mirrors || !ids.is_empty()) {
            return Err(ConfigError::LinkerdFlags);
        }
        if !mcs && self.serviceimport_version.is_some() {
            return Err(ConfigError::ImportVersion);
        }
        let linkerd = match linkerd {
            true => Some(linkerd::Config::from_flags(ids, self.linkerd_mirrors)?),
            false => None,
        };
        Ok(Selection {
            mcs,
            linkerd,
            cluster_id: self.cluster.own()?,
        })
    }

    /// What is read, and from where (a file polled every `poll`).
    fn input(&self, zone: &ZoneFlags, poll: Duration) -> Result<crate::Input, ConfigError> {
        let policy = self.policy(zone)?;
        let selection = self.selection()?;
        let origin = match &self.file {
            Some(path) => Origin::File(file::Config {
                path: path.clone(),
                poll,
            }),
            None => Origin::Kube(kube::Config {
                kubeconfig: self.kube.kubeconfig.clone(),
                context: self.kube.context.clone(),
                namespaces: self.namespaces.clone(),
                import_version: self.serviceimport_version.clone(),
            }),
        };
        Ok(crate::Input {
            zone: zone.config()?,
            source: source::Config { policy, selection },
            origin,
        })
    }
}

impl ZoneFlags {
    fn config(&self) -> Result<zone::Config, ConfigError> {
        Ok(zone::Config {
            zones: Zones::parse(&self.zones)?,
            ttl: self.ttl,
            ns_addresses: self.ns_addresses.clone(),
            limits: Limits {
                endpoints_per_service: unlimited_if_zero(self.max_endpoints_per_service),
                zone_names: unlimited_if_zero(self.max_zone_names),
            },
        })
    }
}

impl Zone {
    /// What `zone` reads (a file is read once).
    pub fn input(&self) -> Result<crate::Input, ConfigError> {
        self.source.input(&self.zone, Duration::ZERO)
    }
}

impl Serve {
    pub fn config(&self) -> Result<crate::Config, ConfigError> {
        let s = &self.serving;
        let input = self.source.input(&self.zone, s.file_poll_interval)?;
        Ok(crate::Config {
            zone: input.zone,
            source: input.source,
            origin: input.origin,
            server: server::Config {
                listen: s.listen,
                admin: self.admin.admin_listen,
                udp: udp::Config {
                    workers: s.udp_workers(),
                },
                xdp: s.xdp.as_ref().map(|interface| xdp::Config {
                    interface: interface.clone(),
                    coalesce: s.xdp_coalesce,
                }),
                tcp: tcp::Config {
                    idle_timeout: s.tcp_idle_timeout,
                    max_connections: s.tcp_max_connections as usize,
                    allow_transfer: s.allow_transfer.clone(),
                    workers: s.tcp_workers(),
                    coalesce: s.tcp_coalesce,
                },
                query_log: s.log_queries,
                grace: s.shutdown_grace,
                lameduck: s.lameduck,
            },
        })
    }
}

/// The CPUs this process may run on.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests;
