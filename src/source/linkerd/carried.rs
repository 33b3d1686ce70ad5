//! What `clusterset-dns linkerd-bridge`'s export half carries on an exported Service, in the
//! annotation [`ANNOTATION`]: the fields of the MCS export that Linkerd's service mirror does not
//! copy (it copies annotations, and every other cluster's bridge reads the exported Service
//! through the Link's credentials), as versioned JSON. One type, written by the export half and
//! read by every reader: the import half, the export half judging its peers, and the DNS
//! server's `--source linkerd`.
//!
//! Version 1 is the JSON of [`Carried`]; the annotations of bridges before it had no `version`
//! and a subset of its keys, and read as version 1. A version this bridge does not know is an
//! error that names it (a newer bridge wrote it), never a silent guess.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotation the export half carries [`Carried`] in.
pub const ANNOTATION: &str = "linkerd-bridge.clusterset-dns.io/export";

/// The version of [`Carried`] this build writes and the newest it reads.
pub const VERSION: u32 = 1;

/// The MCS fields of one cluster's export of a service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Carried {
    #[serde(default = "version_one")]
    pub version: u32,
    /// The exporting cluster's id (its ClusterProperty `cluster.clusterset.k8s.io`, or the
    /// bridge's `--cluster-id`); none when the exporting bridge knew none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The ServiceExport's creation time (RFC 3339, seconds): the MCS API resolves conflicts by
    /// the oldest export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_created: Option<String>,
    /// `clusterIP: None`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headless: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_families: Option<Vec<String>>,
    #[serde(default)]
    pub ports: Vec<Port>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_annotations: BTreeMap<String, String>,
}

fn version_one() -> u32 {
    1
}

/// A port of an exported Service: the one port type of the bridge and of `--source linkerd`.
/// Carried with the `appProtocol` Linkerd's mirrors drop; read from a mirror, or compared as a
/// mirror shows it, without.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    #[serde(default)]
    pub name: String,
    pub port: i32,
    #[serde(default = "tcp")]
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

fn tcp() -> String {
    "TCP".into()
}

/// Ports sort by name, protocol, number, then `appProtocol` (the order of a ServiceImport's
/// ports); the fields keep the order the annotation has always been written in.
impl Ord for Port {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.name, &self.protocol, self.port, &self.app_protocol).cmp(&(
            &other.name,
            &other.protocol,
            other.port,
            &other.app_protocol,
        ))
    }
}

impl PartialOrd for Port {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.name.is_empty() {
            write!(f, "{}:", self.name)?;
        }
        write!(f, "{}/{}", self.port, self.protocol)?;
        if let Some(a) = &self.app_protocol {
            write!(f, " ({a})")?;
        }
        Ok(())
    }
}

impl Port {
    /// A Service's port (`protocol` TCP when unset, as the API server defaults it).
    pub fn of(p: &k8s_openapi::api::core::v1::ServicePort) -> Port {
        Port {
            name: p.name.clone().unwrap_or_default(),
            port: p.port,
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            app_protocol: p.app_protocol.clone(),
        }
    }

    /// The same port as Linkerd's mirrors copy it: without `appProtocol`.
    pub fn mirrored(&self) -> Port {
        Port {
            app_protocol: None,
            ..self.clone()
        }
    }
}

/// What the MCS API compares between the exports of one service beyond ports and type: the
/// field and the Conflict reason a difference gives (mcs-api v0.5.2's constants).
pub const COMPARED: [(&str, &str); 7] = [
    ("sessionAffinity", "SessionAffinityConflict"),
    ("sessionAffinityConfig", "SessionAffinityConfigConflict"),
    ("internalTrafficPolicy", "InternalTrafficPolicyConflict"),
    ("trafficDistribution", "TrafficDistributionConflict"),
    ("ipFamilies", "IPFamilyConflict"),
    ("exportedLabels", "LabelsConflict"),
    ("exportedAnnotations", "AnnotationsConflict"),
];

/// One field two exports disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub field: &'static str,
    /// The Conflict reason (mcs-api's).
    pub reason: &'static str,
    /// The field's JSON in this export and in the other, "unset" when absent.
    pub mine: String,
    pub theirs: String,
}

impl Carried {
    /// Reads the annotation's text; an error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Carried, String> {
        let c: Carried = serde_json::from_str(text)
            .map_err(|e| format!("annotation {ANNOTATION} is not what a bridge writes: {e}"))?;
        if c.version > VERSION {
            return Err(format!(
                "annotation {ANNOTATION} has version {}, written by a newer bridge; this one reads up to version {VERSION}",
                c.version
            ));
        }
        Ok(c)
    }

    /// What a Service's own spec says, for an export no bridge carried anything for (a Service
    /// labelled for Linkerd by hand): no cluster, no export time, no exported labels.
    pub fn of_service(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Carried {
        let spec = spec.clone();
        Carried {
            version: VERSION,
            headless: spec.cluster_ip.as_deref() == Some("None"),
            session_affinity: spec.session_affinity,
            session_affinity_config: spec
                .session_affinity_config
                .and_then(|c| serde_json::to_value(c).ok()),
            internal_traffic_policy: spec.internal_traffic_policy,
            traffic_distribution: spec.traffic_distribution,
            ip_families: spec.ip_families,
            ports: spec.ports.iter().flatten().map(Port::of).collect(),
            ..Carried::default()
        }
    }

    /// The annotation's text: the same export always gives the same text.
    pub fn text(&self) -> String {
        serde_json::to_string(self).expect("a Carried is always JSON")
    }

    /// The value of a field of [`COMPARED`], as JSON; `None` when unset.
    pub fn field(&self, name: &str) -> Option<Value> {
        let v = match name {
            "sessionAffinity" => serde_json::to_value(&self.session_affinity),
            "sessionAffinityConfig" => serde_json::to_value(&self.session_affinity_config),
            "internalTrafficPolicy" => serde_json::to_value(&self.internal_traffic_policy),
            "trafficDistribution" => serde_json::to_value(&self.traffic_distribution),
            "ipFamilies" => serde_json::to_value(&self.ip_families),
            "exportedLabels" if !self.exported_labels.is_empty() => {
                serde_json::to_value(&self.exported_labels)
            }
            "exportedAnnotations" if !self.exported_annotations.is_empty() => {
                serde_json::to_value(&self.exported_annotations)
            }
            _ => return None,
        };
        v.ok().filter(|v| !v.is_null())
    }

    /// The fields of [`COMPARED`] on which `other` differs from this export, in that order.
    pub fn differences(&self, other: &Carried) -> Vec<Difference> {
        let show = |v: Option<Value>| v.map_or_else(|| "unset".into(), |v| v.to_string());
        COMPARED
            .iter()
            .filter_map(|&(field, reason)| {
                let (mine, theirs) = (self.field(field), other.field(field));
                (mine != theirs).then(|| Difference {
                    field,
                    reason,
                    mine: show(mine),
                    theirs: show(theirs),
                })
            })
            .collect()
    }

    /// Where this export stands in [`export_order`], with `tiebreak` (its cluster or object).
    pub fn order<'a>(&'a self, tiebreak: &'a str) -> ExportOrder<'a> {
        export_order(self.export_created.as_deref(), tiebreak)
    }
}

/// The order the MCS API resolves conflicts by, oldest export first: by the export's creation
/// time; exports without one (labelled by hand, or carried by no bridge) after every export
/// with one; ties, and those without, by `tiebreak` (the exporting cluster's id, or the object's
/// name). The one order of the import half, the export half and `--source linkerd`.
pub fn export_order<'a>(created: Option<&'a str>, tiebreak: &'a str) -> ExportOrder<'a> {
    (created.is_none(), created, tiebreak)
}

/// A key of [`export_order`]: smaller is older.
pub type ExportOrder<'a> = (bool, Option<&'a str>, &'a str);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotations_of_earlier_bridges_read_as_version_one() {
        // As bridges before the version field wrote it (serde_json's sorted keys, appProtocol
        // null).
        let old = r#"{"exportCreated":"2026-12-04T20:21:01Z","exportedLabels":{"team":"demo"},"internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ports":[{"appProtocol":null,"name":"http","port":80,"protocol":"TCP"}],"sessionAffinity":"None"}"#;
        let c = Carried::parse(old).unwrap();
        assert_eq!(c.version, 1);
        assert_eq!(c.export_created.as_deref(), Some("2026-12-04T20:21:01Z"));
        assert_eq!(c.exported_labels["team"], "demo");
        assert_eq!(
            c.ports,
            [Port {
                name: "http".into(),
                port: 80,
                protocol: "TCP".into(),
                app_protocol: None
            }]
        );
        assert!(!c.headless && c.cluster.is_none());
        // Written again it has its version, and reads back the same.
        let text = c.text();
        assert!(text.starts_with(r#"{"version":1,"#), "{text}");
        assert_eq!(Carried::parse(&text).unwrap(), c);
    }

    #[test]
    fn a_newer_version_or_another_shape_is_an_error_that_says_so() {
        let e = Carried::parse(r#"{"version":2,"ports":[]}"#).unwrap_err();
        assert!(e.contains("version 2") && e.contains("newer bridge"), "{e}");
        let e = Carried::parse("[1,2]").unwrap_err();
        assert!(e.contains(ANNOTATION), "{e}");
        let e = Carried::parse(r#"{"ports":[{"name":"x"}]}"#).unwrap_err();
        assert!(e.contains("port"), "{e}");
        // A field a newer bridge adds within version 1 is passed over.
        assert!(Carried::parse(r#"{"version":1,"futureField":3}"#).is_ok());
    }

    #[test]
    fn differences_name_each_compared_field_with_mcs_api_reasons() {
        let mine = Carried {
            session_affinity: Some("None".into()),
            exported_labels: BTreeMap::from([("team".into(), "shop".into())]),
            ..Carried::default()
        };
        let theirs = Carried {
            session_affinity: Some("ClientIP".into()),
            traffic_distribution: Some("PreferClose".into()),
            exported_labels: BTreeMap::from([("team".into(), "cart".into())]),
            export_created: Some("2026-12-01T00:00:00Z".into()),
            ..Carried::default()
        };
        let d = mine.differences(&theirs);
        let reasons: Vec<&str> = d.iter().map(|d| d.reason).collect();
        assert_eq!(
            reasons,
            [
                "SessionAffinityConflict",
                "TrafficDistributionConflict",
                "LabelsConflict"
            ]
        );
        assert_eq!(
            (d[1].mine.as_str(), d[1].theirs.as_str()),
            ("unset", "\"PreferClose\"")
        );
        assert!(mine.differences(&mine.clone()).is_empty());
    }

    #[test]
    fn the_oldest_export_comes_first_and_exports_without_a_time_last() {
        let mut v = [
            export_order(None, "a"),
            export_order(Some("2026-12-04T10:00:00Z"), "z"),
            export_order(Some("2026-12-04T09:00:00Z"), "y"),
            export_order(Some("2026-12-04T09:00:00Z"), "b"),
        ];
        v.sort();
        let order: Vec<&str> = v.iter().map(|k| k.2).collect();
        assert_eq!(order, ["b", "y", "z", "a"]);
    }
}
