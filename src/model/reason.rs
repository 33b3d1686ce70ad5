//! The words the sources and the zone report with: which kind of object, why one was skipped,
//! why an address is never answered, what a watch said, which limit held a service back. Each is an enum with the metric label it is counted under
//! and an `ALL` list, so the metrics start every label set at 0 from the list itself and a new
//! word cannot be counted without being listed.

/// Declares a fieldless enum with `label()` (its metric label) and `ALL` (every variant, in
/// declaration order).
macro_rules! labelled {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $label:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &[$name] = &[$($name::$variant,)+];

            /// The word a metric label and a log line carry.
            pub fn label(self) -> &'static str {
                match self {
                    $($name::$variant => $label,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.label())
            }
        }
    };
}

labelled! {
    /// A kind of object a source reads (the `kind` label).
    pub enum ObjectKind {
        /// `multicluster.x-k8s.io` ServiceImport.
        ServiceImport => "ServiceImport",
        /// `discovery.k8s.io/v1` EndpointSlice with the MCS labels.
        EndpointSlice => "EndpointSlice",
        /// core/v1 Service: Linkerd's federated and mirror Services.
        Service => "Service",
        /// `about.k8s.io` ClusterProperty (KEP-2149): the server's own cluster id.
        ClusterProperty => "ClusterProperty",
        /// `discovery.k8s.io/v1` EndpointSlice of one of this cluster's headless Services
        /// (`kubernetes.io/service-name`): where Lighthouse's slices of this cluster hold
        /// Globalnet's addresses.
        LocalEndpointSlice => "LocalEndpointSlice",
    }
}

labelled! {
    /// Why an object (or a service) is not served (`clusterset_dns_skipped_objects_total`'s
    /// `reason`).
    pub enum Skip {
        /// It cannot be read into its shape, or a required field is missing.
        Malformed => "malformed",
        /// A name or namespace that is not a DNS label.
        BadName => "bad_name",
        /// A text that is not an IP address.
        BadIp => "bad_ip",
        /// A port out of range, of an unknown protocol, or whose name cannot be an SRV label.
        BadPort => "bad_port",
        /// An endpoint hostname that is not a DNS label.
        BadHostname => "bad_hostname",
        /// A cluster id that is not one or two DNS labels.
        BadCluster => "bad_cluster",
        /// An EndpointSlice of another address type than IPv4 or IPv6.
        BadAddressType => "bad_address_type",
        /// A Linkerd annotation that is malformed or disagrees with another.
        BadAnnotation => "bad_annotation",
        /// A Linkerd federated Service whose annotations name no member.
        NoMembers => "no_members",
        /// Linkerd's Services give a service a ServiceImport gives too (the import is served).
        Conflict => "conflict",
        /// A service whose names do not fit in a DNS name (the zone builder skips it).
        NameTooLong => "name_too_long",
        /// An import answered from its endpoints whose implementation says it publishes no
        /// EndpointSlices (`status.endpointSliceObjects: Absent`), and that has none.
        NoEndpointSlices => "no_endpoint_slices",
    }
}

labelled! {
    /// Why an imported address is never answered (`clusterset_dns_refused_addresses_total`'s
    /// `reason`): the classes every server refuses, then `--deny-cidr` and `--allow-cidr`.
    pub enum Refusal {
        Loopback => "loopback",
        /// All of 0.0.0.0/8 and `::`.
        Unspecified => "unspecified",
        /// 169.254/16 and fe80::/10, which hold the cloud metadata address.
        LinkLocal => "link_local",
        Multicast => "multicast",
        /// 255.255.255.255.
        Broadcast => "broadcast",
        /// The metadata addresses outside link-local (fd00:ec2::254, 100.100.100.200).
        Metadata => "metadata",
        /// Inside a `--deny-cidr` range.
        Denied => "denied",
        /// Outside every `--allow-cidr` range.
        NotAllowed => "not_allowed",
    }
}

labelled! {
    /// What a watch said of one object (`clusterset_dns_source_events_total`'s `event`).
    pub enum WatchEvent {
        /// Listed, in a first list or a relist.
        List => "list",
        /// Added or changed.
        Apply => "apply",
        Delete => "delete",
    }
}

labelled! {
    /// Which limit of the zone's budget a refused service ran into (the `limit` label).
    pub enum Limit {
        /// `--max-endpoints-per-service`.
        EndpointsPerService => "endpoints_per_service",
        /// `--max-zone-names`.
        ZoneNames => "zone_names",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_distinct_metric_words() {
        fn check(labels: Vec<&'static str>) {
            let mut seen = std::collections::HashSet::new();
            for l in &labels {
                assert!(seen.insert(*l), "{l} twice");
                assert!(
                    l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                    "{l}"
                );
            }
        }
        check(ObjectKind::ALL.iter().map(|k| k.label()).collect());
        check(Skip::ALL.iter().map(|k| k.label()).collect());
        check(Refusal::ALL.iter().map(|k| k.label()).collect());
        check(WatchEvent::ALL.iter().map(|k| k.label()).collect());
        check(Limit::ALL.iter().map(|k| k.label()).collect());
        assert_eq!(Skip::NameTooLong.to_string(), "name_too_long");
    }
}
