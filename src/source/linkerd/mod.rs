//! Linkerd's multicluster Services as clusterset names (`--source linkerd`): the federated and
//! mirror Services that Linkerd's service mirror (2.17 and later) creates in each consuming
//! cluster, read from core/v1 `Service` objects and turned into the same `model::Service` an
//! import gives. Shared by the Kubernetes and file sources; their part of the store ([`join`])
//! keeps each object as a [`Member`] of its logical service and joins the members into it.
//!
//! Shapes, from linkerd/linkerd2 at `version-2.20` (eadc1acf): `pkg/k8s/labels.go` and
//! `multicluster/service-mirror/cluster_watcher.go`, `cluster_watcher_headless.go`. Objects are
//! told apart by labels and annotations, never by their names:
//! - federated `<svc>-federated`: label `mirror.linkerd.io/mirrored-service: "true"`, no
//!   `mirror.linkerd.io/cluster-name`; annotations `multicluster.linkerd.io/remote-discovery:
//!   <svc>@<link>[,…]` and/or `multicluster.linkerd.io/local-discovery: <svc>`;
//! - mirror `<svc>-<link>`: labels `mirrored-service` and `cluster-name: <link>`, annotation
//!   `mirror.linkerd.io/remote-svc-fq-name: <svc>.<ns>.svc.<domain>`; `clusterIP: None` when
//!   the exported service is headless with hostnames (a headless mirror);
//! - endpoint mirror `<host>-<link>` of a headless mirror, with its own ClusterIP: the mirror
//!   labels plus `mirror.linkerd.io/headless-mirror-svc-name: <svc>-<link>`, annotation
//!   `remote-svc-fq-name: <host>.<svc>.<ns>.svc.<domain>`.

pub mod carried;
pub mod join;
pub mod shape;

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::object::{Kind, Meta, RawPort, Read, Refused, Resource, addresses, invalid, ports};
use super::policy::Policy;
use crate::model::{ObjectKind, Port, ServiceKey, Skip};
use crate::wire::{cluster_id, is_label};

pub const LABEL_MIRRORED: &str = "mirror.linkerd.io/mirrored-service";
pub const LABEL_CLUSTER: &str = "mirror.linkerd.io/cluster-name";
pub const LABEL_HEADLESS_PARENT: &str = "mirror.linkerd.io/headless-mirror-svc-name";
pub const LABEL_GATEWAY: &str = "mirror.linkerd.io/mirrored-gateway";
pub const ANNOTATION_FQ_NAME: &str = "mirror.linkerd.io/remote-svc-fq-name";
pub const ANNOTATION_REMOTE: &str = "multicluster.linkerd.io/remote-discovery";
pub const ANNOTATION_LOCAL: &str = "multicluster.linkerd.io/local-discovery";
/// What `clusterset-dns linkerd-bridge`'s export half carries on an exported Service, as JSON,
/// for Linkerd to copy onto its mirrors (see [`crate::bridge::model::CARRIED`]); read here for the
/// export's creation time, which orders exports whose ports clash.
pub const ANNOTATION_CARRIED: &str = carried::ANNOTATION;

/// The label selector the Kubernetes source watches Services with.
pub const SELECTOR: &str = "mirror.linkerd.io/mirrored-service=true";

/// Whether `labels` are those [`SELECTOR`] selects: the object is one Linkerd's service mirror
/// wrote.
pub fn selected(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(LABEL_MIRRORED))
        .map(String::as_str)
        == Some("true")
}

/// How Linkerd's objects are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `--linkerd-cluster-id`: the cluster id used in names for a Link's name (the
    /// `mirror.linkerd.io/cluster-name` label); a Link not in it is named by itself.
    pub cluster_ids: BTreeMap<String, String>,
    /// `--linkerd-mirrors`: a service with no federated Service answers its mirrors' ClusterIPs.
    pub mirrors: bool,
}

/// A `--linkerd-cluster-id` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--linkerd-cluster-id {0:?} is not LINK=ID")]
    NotLinkId(String),
    #[error("--linkerd-cluster-id {0:?} names no Link")]
    NoLink(String),
    #[error("--linkerd-cluster-id {pair:?}: {id:?} is not a cluster id (one or two DNS labels)")]
    BadClusterId { pair: String, id: String },
    #[error("--linkerd-cluster-id names Link {0:?} twice")]
    LinkTwice(String),
}

impl Config {
    /// From `--linkerd-cluster-id` (`LINK=ID` pairs, the ids lower-cased) and
    /// `--linkerd-mirrors`.
    pub fn from_flags(pairs: &[String], mirrors: bool) -> Result<Self, ConfigError> {
        let mut cluster_ids = BTreeMap::new();
        for pair in pairs {
            let Some((link, id)) = pair.split_once('=') else {
                return Err(ConfigError::NotLinkId(pair.clone()));
            };
            let (link, given) = (link.trim(), id.trim());
            if link.is_empty() {
                return Err(ConfigError::NoLink(pair.clone()));
            }
            let Some(id) = cluster_id(given) else {
                return Err(ConfigError::BadClusterId {
                    pair: pair.clone(),
                    id: given.to_string(),
                });
            };
            if cluster_ids.insert(link.to_string(), id).is_some() {
                return Err(ConfigError::LinkTwice(link.to_string()));
            }
        }
        Ok(Config {
            cluster_ids,
            mirrors,
        })
    }

    fn cluster_id<'a>(&'a self, link: &'a str) -> &'a str {
        self.cluster_ids.get(link).map_or(link, String::as_str)
    }
}

/// A core/v1 Service as we read it.
#[derive(Debug, Deserialize)]
pub struct LinkerdService {
    #[serde(default)]
    metadata: Meta,
    spec: Option<ServiceSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceSpec {
    #[serde(rename = "clusterIP")]
    cluster_ip: Option<String>,
    #[serde(rename = "clusterIPs")]
    cluster_ips: Option<Vec<String>>,
    ports: Option<Vec<RawPort>>,
}

const KIND: ObjectKind = ObjectKind::Service;

/// Linkerd's Services, read with `config`.
#[derive(Debug, Clone, Default)]
pub struct Services {
    pub config: Config,
}

impl Kind for Services {
    type Shape = LinkerdService;
    type Output = Member;
    type Part = join::Members;
    const KIND: ObjectKind = KIND;
    const RESOURCE: Resource = Resource {
        group: "",
        versions: &["v1"],
        plural: "services",
        required: true,
        namespaced: true,
    };

    /// Only Linkerd's, chosen by the API server.
    fn selector(&self) -> Option<&'static str> {
        Some(SELECTOR)
    }

    fn set_meta(shape: &mut LinkerdService, meta: Meta) {
        shape.metadata = meta;
    }

    fn object_name(m: &Member) -> String {
        format!("{}/{}", m.service.namespace, m.object)
    }

    fn refused(m: &Member) -> &[Refused] {
        &m.refused
    }

    fn pack(m: Member) -> Member {
        m
    }

    fn convert(&self, raw: LinkerdService, policy: &Policy) -> Read<Member> {
        convert(raw, &self.config, policy)
    }
}

/// What one of Linkerd's Services is to its logical service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A federated Service: the service's own address.
    Federated { ips: Vec<IpAddr>, ports: Vec<Port> },
    /// One Link's mirror of the service (only read with `--linkerd-mirrors`).
    Mirror {
        cluster: String,
        ips: Vec<IpAddr>,
        ports: Vec<Port>,
        /// When the export was made, if the linkerd-bridge carried it ([`exported`]).
        exported: Option<Box<str>>,
    },
    /// One Link's headless mirror: its hosts are the endpoint mirrors that name it.
    Headless {
        cluster: String,
        ports: Vec<Port>,
        exported: Option<Box<str>>,
    },
    /// One host of a headless mirror, with a ClusterIP of its own.
    Host {
        cluster: String,
        /// The headless mirror's object name (`headless-mirror-svc-name`).
        parent: String,
        hostname: String,
        ips: Vec<IpAddr>,
        ports: Vec<Port>,
    },
}

/// One of Linkerd's Services, read: the logical service it belongs to and what it is to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The Service's object name.
    pub object: String,
    /// `<svc>` and `<ns>` of the names it gives.
    pub service: ServiceKey,
    pub role: Role,
    /// Addresses left out of the Service's ClusterIPs.
    pub refused: Vec<Refused>,
}

/// Reads one Service: a [`Member`], ignored (not one of Linkerd's, a gateway mirror, a mirror
/// while `--linkerd-mirrors` is off), or invalid (logged once and counted).
fn convert(mut raw: LinkerdService, config: &Config, policy: &Policy) -> Read<Member> {
    let object = raw.metadata.object();
    let (name, namespace) = match raw.metadata.identity(KIND) {
        Ok(id) => id,
        Err(e) => return Read::Invalid(e),
    };
    let labels = raw.metadata.labels.unwrap_or_default();
    let annotations = raw.metadata.annotations.unwrap_or_default();
    let shape = match shape::classify(&namespace, &labels, &annotations) {
        Ok(shape) => Ok(shape),
        Err(shape::Unread::Passed(what)) => {
            return Read::Ignored(format!("{KIND} {object}: {what}"));
        }
        Err(shape::Unread::Invalid(skip, why)) => Err((skip, why)),
    };
    if !is_label(&namespace) {
        return invalid(
            KIND,
            &object,
            Skip::BadName,
            format!("metadata.namespace {namespace:?} is not a lower-case DNS label"),
        );
    }
    let spec = raw.spec.unwrap_or_default();
    let ports = match ports(spec.ports.unwrap_or_default(), "spec.ports", true) {
        Ok(ports) => ports,
        Err((reason, why)) => return invalid(KIND, &object, reason, why),
    };
    let headless = spec.cluster_ip.as_deref() == Some("None");
    // `clusterIPs` holds `clusterIP` first; older objects (and files) may give only the latter.
    let (field, texts) = match spec.cluster_ips {
        Some(ips) if !ips.is_empty() => ("spec.clusterIPs", ips),
        _ => ("spec.clusterIP", spec.cluster_ip.into_iter().collect()),
    };
    let (ips, refused) = if headless {
        (Vec::new(), Vec::new())
    } else {
        match addresses(texts, field, policy) {
            Ok(read) => read,
            Err(why) => return invalid(KIND, &object, Skip::BadIp, why),
        }
    };
    let member = |svc: String, role: Role, refused: Vec<Refused>| {
        Read::Object(Member {
            object: name.clone(),
            service: ServiceKey {
                namespace: namespace.clone(),
                name: svc,
            },
            role,
            refused,
        })
    };
    let shape = match shape {
        Ok(shape) => shape,
        Err((skip, why)) => return invalid(KIND, &object, skip, why),
    };
    let (link, svc) = match shape {
        shape::Shape::Federated { service, .. } => {
            return member(service, Role::Federated { ips, ports }, refused);
        }
        shape::Shape::Mirror { link, service } => (link, service),
        shape::Shape::Host {
            link,
            service,
            parent,
            hostname,
        } => {
            let Some(cluster) = cluster_id(config.cluster_id(&link)) else {
                return bad_cluster(&object, &link, config);
            };
            let role = Role::Host {
                cluster,
                parent,
                hostname,
                ips,
                ports,
            };
            return member(service, role, refused);
        }
    };
    let Some(cluster) = cluster_id(config.cluster_id(&link)) else {
        return bad_cluster(&object, &link, config);
    };
    let exported = exported(&annotations);
    if headless {
        return member(
            svc,
            Role::Headless {
                cluster,
                ports,
                exported,
            },
            refused,
        );
    }
    if !config.mirrors {
        return Read::Ignored(format!(
            "{KIND} {object}: a mirror of {svc} from {link}; mirrors are answered only with --linkerd-mirrors"
        ));
    }
    member(
        svc,
        Role::Mirror {
            cluster,
            ips,
            ports,
            exported,
        },
        refused,
    )
}

/// A mirror whose Link is named by no cluster id.
fn bad_cluster(object: &str, link: &str, config: &Config) -> Read<Member> {
    let cluster = config.cluster_id(link).to_ascii_lowercase();
    invalid(
        KIND,
        object,
        Skip::BadCluster,
        format!(
            "cluster id {cluster:?} (label {LABEL_CLUSTER}={link:?}) is not one or two DNS \
             labels; map the Link to one with --linkerd-cluster-id"
        ),
    )
}

/// The export's creation time in the linkerd-bridge's carried annotation, if there is one
/// that says it (one that does not is the bridge's to report; here the export just has no
/// time, like one labelled by hand).
fn exported(annotations: &BTreeMap<String, String>) -> Option<Box<str>> {
    let carried = carried::Carried::parse(annotations.get(ANNOTATION_CARRIED)?).ok()?;
    carried.export_created.map(Box::from)
}

#[cfg(test)]
mod tests {
    use super::join::service;
    use super::*;
    use crate::model::{Protocol, ServiceType};
    use crate::source::file::classify;
    use crate::source::{Classified, Selection, object::ObjectError};

    fn read(yaml: &str, config: &Config) -> Classified {
        let selection = Selection {
            mcs: true,
            linkerd: Some(config.clone()),
            cluster_id: None,
        };
        classify(
            serde_yaml_ng::from_str(yaml).unwrap(),
            &Policy::default(),
            &selection,
        )
    }

    fn member(yaml: &str, config: &Config) -> Member {
        match crate::source::file::tests::read(
            &Services {
                config: config.clone(),
            },
            yaml,
        ) {
            Read::Object(m) => m,
            other => panic!("{other:?}"),
        }
    }

    fn error(yaml: &str) -> ObjectError {
        match read(yaml, &Config::default()) {
            Classified::Invalid(e) => e,
            other => panic!("{other:?}"),
        }
    }

    const FEDERATED: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web-federated\n  namespace: shop\n  \
        labels: {mirror.linkerd.io/mirrored-service: 'true', app: web}\n  \
        annotations: {multicluster.linkerd.io/remote-discovery: 'web@east,web@west', multicluster.linkerd.io/local-discovery: web}\n\
        spec: {clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10, 'fd00::10'], ports: [{name: http, port: 80, targetPort: 8080}]}";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_federated_service_is_named_by_its_members() {
        let m = member(FEDERATED, &Config::default());
        assert_eq!(m.object, "web-federated");
        assert_eq!(m.service.to_string(), "shop/web");
        let Role::Federated { ips, ports } = &m.role else {
            panic!("{m:?}")
        };
        assert_eq!(ips, &[ip("10.96.0.10"), ip("fd00::10")]);
        assert_eq!(ports[0].port, 80);
        // Local discovery alone names it too.
        let m = member(
            &FEDERATED.replace(
                "multicluster.linkerd.io/remote-discovery: 'web@east,web@west', ",
                "",
            ),
            &Config::default(),
        );
        assert_eq!(m.service.name, "web");
        // The service never comes from the object's name.
        let m = member(
            &FEDERATED
                .replace("name: web-federated", "name: anything")
                .replace("web@", "api@")
                .replace("local-discovery: web", "local-discovery: api"),
            &Config::default(),
        );
        assert_eq!(m.service.name, "api");
    }

    #[test]
    fn federated_services_that_name_nothing_or_disagree_are_skipped() {
        let none = FEDERATED
            .replace(
                "multicluster.linkerd.io/remote-discovery: 'web@east,web@west', ",
                "",
            )
            .replace("multicluster.linkerd.io/local-discovery: web", "other: x");
        let e = error(&none);
        assert_eq!(
            (e.kind, e.reason),
            (ObjectKind::Service, Skip::NoMembers),
            "{e}"
        );
        assert!(e.to_string().contains("shop/web-federated"), "{e}");
        let e = error(&FEDERATED.replace("web@west", "api@west"));
        assert_eq!(e.reason, Skip::BadAnnotation, "{e}");
        let e = error(&FEDERATED.replace("web@west", "web-west"));
        assert_eq!(e.reason, Skip::BadAnnotation, "{e}");
        assert!(e.to_string().contains("<service>@<link>"), "{e}");
        let long = "x".repeat(64);
        let e = error(
            &FEDERATED
                .replace("web@", &format!("{long}@"))
                .replace("local-discovery: web", &format!("local-discovery: {long}")),
        );
        assert_eq!(e.reason, Skip::BadName, "{e}");
        let e = error(&FEDERATED.replace("10.96.0.10,", "10.96.0.300,"));
        assert_eq!(e.reason, Skip::BadIp, "{e}");
        assert!(e.to_string().contains("spec.clusterIPs[0]"), "{e}");
    }

    const MIRROR: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web-east\n  namespace: shop\n  \
        labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}\n  \
        annotations: {mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local, mirror.linkerd.io/remote-resource-version: '12'}\n\
        spec: {clusterIP: 10.96.0.11, ports: [{name: http, port: 80}]}";

    #[test]
    fn mirrors_are_read_only_when_asked_for_and_gateways_never() {
        let c = read(MIRROR, &Config::default());
        assert!(
            matches!(&c, Read::Ignored(w) if w.contains("--linkerd-mirrors")),
            "{c:?}"
        );
        let config = Config {
            mirrors: true,
            cluster_ids: [("east".to_string(), "east.prod".to_string())].into(),
        };
        let m = member(MIRROR, &config);
        assert_eq!(m.service.to_string(), "shop/web");
        assert_eq!(
            m.role,
            Role::Mirror {
                cluster: "east.prod".into(),
                ips: vec![ip("10.96.0.11")],
                ports: vec![Port {
                    name: Some("http".into()),
                    protocol: Protocol::Tcp,
                    port: 80,
                }],
                exported: None,
            }
        );
        let c = read(
            &MIRROR.replace(
                "cluster-name: east}",
                "cluster-name: east, mirror.linkerd.io/mirrored-gateway: 'true'}",
            ),
            &config,
        );
        assert!(matches!(c, Read::Ignored(_)), "{c:?}");
        // A Service without the label is not Linkerd's, even when the file holds it.
        let c = read(
            &MIRROR.replace("mirror.linkerd.io/mirrored-service: 'true', ", ""),
            &config,
        );
        assert!(matches!(c, Read::Ignored(_)), "{c:?}");
        let e = error(&MIRROR.replace("cluster-name: east", "cluster-name: a.b.c"));
        assert_eq!(e.reason, Skip::BadCluster, "{e}");
        let e = error(&MIRROR.replace("web.shop.svc.cluster.local", "web"));
        assert_eq!(e.reason, Skip::BadAnnotation, "{e}");
    }

    const HEADLESS: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: db-east\n  namespace: data\n  \
        labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}\n  \
        annotations: {mirror.linkerd.io/remote-svc-fq-name: db.data.svc.cluster.local}\n\
        spec: {clusterIP: None, clusterIPs: [None], ports: [{name: pg, port: 5432}]}";

    fn host(n: u8) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: db-{n}-east\n  namespace: data\n  \
             labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east, mirror.linkerd.io/headless-mirror-svc-name: db-east}}\n  \
             annotations: {{mirror.linkerd.io/remote-svc-fq-name: db-{n}.db.data.svc.cluster.local}}\n\
             spec: {{clusterIP: 10.96.1.{n}, ports: [{{name: pg, port: 5432}}]}}"
        )
    }

    #[test]
    fn headless_mirrors_and_their_hosts_make_a_headless_service() {
        let config = Config::default();
        let parent = member(HEADLESS, &config);
        assert!(matches!(parent.role, Role::Headless { .. }), "{parent:?}");
        let mut members = BTreeMap::from([(parent.object.clone(), parent.role)]);
        let key = parent.service.clone();
        // No hosts yet: a headless service with no endpoints (NXDOMAIN, as an import).
        let s = service(&key, &members).unwrap();
        assert_eq!(s.kind, ServiceType::Headless);
        assert!(s.slices.is_empty());
        for n in [1, 2] {
            let h = member(&host(n), &config);
            assert_eq!(h.service, key);
            members.insert(h.object, h.role);
        }
        let s = service(&key, &members).unwrap();
        let hosts: Vec<_> = s
            .slices
            .iter()
            .map(|sl| {
                (
                    sl.cluster.as_deref().unwrap(),
                    sl.endpoints[0].hostname.as_deref().unwrap(),
                    sl.endpoints[0].addresses[0].to_string(),
                )
            })
            .collect();
        assert_eq!(
            hosts,
            [
                ("east", "db-1", "10.96.1.1".into()),
                ("east", "db-2", "10.96.1.2".into())
            ]
        );
        assert_eq!(s.ports.len(), 1);
        // Hosts without their headless mirror are not served.
        members.remove("db-east");
        assert_eq!(service(&key, &members), None);
    }

    #[test]
    fn a_federated_service_wins_over_mirrors_and_mirrors_union() {
        let config = Config {
            mirrors: true,
            ..Config::default()
        };
        let east = member(MIRROR, &config);
        let west = member(
            &MIRROR
                .replace("web-east", "web-west")
                .replace("cluster-name: east", "cluster-name: west")
                .replace("10.96.0.11", "10.96.0.12"),
            &config,
        );
        let key = east.service.clone();
        let mut members = BTreeMap::from([
            (east.object.clone(), east.role),
            (west.object.clone(), west.role),
        ]);
        let s = service(&key, &members).unwrap();
        assert_eq!(
            (s.kind, s.ips.clone()),
            (
                ServiceType::ClusterSetIp,
                vec![ip("10.96.0.11"), ip("10.96.0.12")]
            )
        );
        let fed = member(FEDERATED, &config);
        members.insert(fed.object, fed.role);
        let s = service(&key, &members).unwrap();
        assert_eq!(s.ips, [ip("10.96.0.10"), ip("fd00::10")]);
    }

    #[test]
    fn mirrors_ports_add_up_by_name_and_the_oldest_export_keeps_a_clash() {
        let config = Config {
            mirrors: true,
            ..Config::default()
        };
        // A mirror of `link`'s export made at `created` (None: labelled by hand), with `ports`.
        let mirror = |link: &str, created: Option<&str>, ports: &str| {
            let carried = created.map_or(String::new(), |c| {
                format!(
                    ", linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{c}\"}}'"
                )
            });
            member(
                &MIRROR
                    .replace("web-east", &format!("web-{link}"))
                    .replace("cluster-name: east", &format!("cluster-name: {link}"))
                    .replace(
                        "remote-resource-version: '12'",
                        &format!("remote-resource-version: '12'{carried}"),
                    )
                    .replace("[{name: http, port: 80}]", ports),
                &config,
            )
        };
        let members: BTreeMap<String, Role> = [
            mirror("a", None, "[{name: http, port: 79}]"),
            mirror(
                "b",
                Some("2026-12-04T10:00:00Z"),
                "[{name: http, port: 81}, {name: admin, port: 9990}]",
            ),
            mirror(
                "c",
                Some("2026-12-01T10:00:00Z"),
                "[{name: http, port: 80}]",
            ),
        ]
        .into_iter()
        .map(|m| (m.object, m.role))
        .collect();
        let key = ServiceKey {
            namespace: "shop".into(),
            name: "web".into(),
        };
        let s = service(&key, &members).unwrap();
        let ports: Vec<(Option<&str>, u16)> = s
            .ports
            .iter()
            .map(|p| (p.name.as_deref(), p.port))
            .collect();
        // c is the oldest export, b the next, a has no time: http is c's, admin b's.
        assert_eq!(ports, [(Some("http"), 80), (Some("admin"), 9990)]);

        // A cluster exporting it headless: the oldest export's kind decides.
        let headless = |created: &str| {
            let m = mirror("d", Some(created), "[{name: http, port: 80}]");
            let Role::Mirror {
                cluster,
                ports,
                exported,
                ..
            } = m.role
            else {
                panic!("{m:?}")
            };
            (
                m.object,
                Role::Headless {
                    cluster,
                    ports,
                    exported,
                },
            )
        };
        let mut with = members.clone();
        let (object, role) = headless("2026-11-01T10:00:00Z");
        with.insert(object, role);
        assert_eq!(service(&key, &with).unwrap().kind, ServiceType::Headless);
        let mut with = members.clone();
        let (object, role) = headless("2026-12-02T10:00:00Z");
        with.insert(object, role);
        assert_eq!(
            service(&key, &with).unwrap().kind,
            ServiceType::ClusterSetIp
        );
    }
}
