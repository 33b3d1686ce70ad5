//! KEP-2149's ClusterProperty (`about.k8s.io/v1alpha1`, cluster-scoped, `spec.value`): the one
//! named `cluster.clusterset.k8s.io` is the server's own cluster id, which answers built from
//! endpoints are chosen by (`zone::schema`). Other properties (`clusterset.k8s.io`, …) are read
//! and ignored. The API group is optional: a cluster without its CRD is served all the same.
//!
//! Shape, from KEP-2149 (sigs.k8s.io/about-api, which the Go module proxy does not serve here):
//! `apiVersion: about.k8s.io/v1alpha1`, `kind: ClusterProperty`, `metadata.name`, `spec.value`
//! (a string of at most 128000 bytes).

use serde::Deserialize;

use super::object::{Kind, Meta, ObjectId, Part, Read, Resource, invalid};
use super::policy::Policy;
use crate::model::{ObjectKind, ServiceKey, Skip};
use crate::wire::cluster_id;

/// The property whose value is the cluster's id within its cluster set.
pub const CLUSTER_ID: &str = "cluster.clusterset.k8s.io";

/// ClusterProperties.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterProperties;

/// The own cluster id a ClusterProperty gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterId {
    /// The property's name (always [`CLUSTER_ID`]).
    pub object: String,
    /// Lower-cased: one or two DNS labels, as the slices' `source-cluster` labels are read.
    pub id: String,
}

/// A ClusterProperty as we read it.
#[derive(Debug, Deserialize)]
pub struct ClusterProperty {
    #[serde(default)]
    metadata: Meta,
    spec: Option<PropertySpec>,
}

#[derive(Debug, Deserialize)]
struct PropertySpec {
    value: Option<String>,
}

impl Kind for ClusterProperties {
    type Shape = ClusterProperty;
    type Output = ClusterId;
    type Part = Property;
    const KIND: ObjectKind = ObjectKind::ClusterProperty;
    const RESOURCE: Resource = Resource {
        group: "about.k8s.io",
        versions: &["v1alpha1"],
        plural: "clusterproperties",
        required: false,
        namespaced: false,
    };

    fn set_meta(shape: &mut ClusterProperty, meta: Meta) {
        shape.metadata = meta;
    }

    fn object_name(c: &ClusterId) -> String {
        c.object.clone()
    }

    fn pack(c: ClusterId) -> ClusterId {
        c
    }

    fn convert(&self, raw: ClusterProperty, _: &Policy) -> Read<ClusterId> {
        const KIND: ObjectKind = ObjectKind::ClusterProperty;
        let Some(name) = raw.metadata.name else {
            return invalid(
                KIND,
                "?",
                Skip::Malformed,
                "metadata.name is required".into(),
            );
        };
        if name != CLUSTER_ID {
            return Read::Ignored(format!(
                "{KIND} {name}: not {CLUSTER_ID}, which names the cluster"
            ));
        }
        let value = raw.spec.and_then(|s| s.value).unwrap_or_default();
        let Some(id) = cluster_id(&value) else {
            return invalid(
                KIND,
                &name,
                Skip::BadCluster,
                format!(
                    "spec.value {value:?} is not a cluster id (one or two DNS labels); the server \
                     has no own cluster until it is"
                ),
            );
        };
        Read::Object(ClusterId { object: name, id })
    }
}

/// The ClusterProperty's part of a source's store: the one naming the own cluster. It gives no
/// service: the id changes every service's answers at once, which the sources send as a full
/// set when they see it change.
#[derive(Debug, Default)]
pub struct Property(Option<ClusterId>);

impl Part for Property {
    type Object = ClusterId;

    fn apply(&mut self, c: ClusterId) -> Vec<ServiceKey> {
        self.0 = Some(c);
        Vec::new()
    }

    fn delete(&mut self, _: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        if self.0.as_ref().is_some_and(|c| c.object == id.1) {
            self.0 = None;
        }
        None
    }

    /// Cluster-scoped: no namespace.
    fn ids(&self, _: ObjectKind, _: Option<&str>) -> Vec<ObjectId> {
        self.0
            .iter()
            .map(|c| (String::new(), c.object.clone()))
            .collect()
    }

    fn count(&self, _: ObjectKind) -> usize {
        usize::from(self.0.is_some())
    }

    fn own_cluster(&self) -> Option<&str> {
        self.0.as_ref().map(|c| c.id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Classified;
    use crate::source::file::tests::{one, read};

    fn property(name: &str, value: &str) -> Classified {
        one(&format!(
            "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {{name: {name}}}\nspec: {{value: {value}}}"
        ))
    }

    #[test]
    fn the_cluster_id_property_names_the_cluster_and_others_are_ignored() {
        let c = read(
            &ClusterProperties,
            &format!(
                "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {{name: {CLUSTER_ID}}}\nspec: {{value: West.Prod}}"
            ),
        );
        let Read::Object(id) = c else { panic!("{c:?}") };
        assert_eq!(id.id, "west.prod");
        assert!(matches!(
            property("clusterset.k8s.io", "mine"),
            Classified::Ignored(_)
        ));
        for bad in ["a.b.c", "'-x'", "''", "Under_score"] {
            let Classified::Invalid(e) = property(CLUSTER_ID, bad) else {
                panic!("{bad} accepted")
            };
            assert_eq!(
                (e.kind, e.reason),
                (ObjectKind::ClusterProperty, Skip::BadCluster)
            );
            assert!(e.to_string().contains(CLUSTER_ID), "{e}");
        }
        // Another version of the group is not this kind.
        let c = one(
            "apiVersion: about.k8s.io/v1beta9\nkind: ClusterProperty\nmetadata: {name: cluster.clusterset.k8s.io}\nspec: {value: a}",
        );
        assert!(matches!(c, Classified::Ignored(_)), "{c:?}");
    }
}
