use k8s_openapi::api::core::v1::Service;

use super::*;

fn labelled(labels: &[(&str, &str)]) -> Service {
    let mut s = Service::default();
    s.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    s
}

/// This cluster's exported Services are marked by `is_exported`, a linked cluster's are
/// watched by `selectors`: the two say the same of every label set.
#[test]
fn the_mark_of_an_exported_service_is_what_the_selectors_select() {
    let [federated, exported] = selectors();
    assert_eq!(
        federated,
        "mirror.linkerd.io/federated=member,!mirror.linkerd.io/mirrored-service"
    );
    assert_eq!(
        exported,
        "mirror.linkerd.io/exported in (true,remote-discovery),!mirror.linkerd.io/mirrored-service"
    );
    let cases: [(&[(&str, &str)], bool); 9] = [
        (&[("mirror.linkerd.io/federated", "member")], true),
        (&[("mirror.linkerd.io/exported", "true")], true),
        (&[("mirror.linkerd.io/exported", "remote-discovery")], true),
        (&[("mirror.linkerd.io/exported", "false")], false),
        (&[("mirror.linkerd.io/federated", "true")], false),
        (&[("app", "web")], false),
        (&[], false),
        // Linkerd's mirrors copy the exported Service's labels: `!key` leaves out any value.
        (
            &[
                ("mirror.linkerd.io/exported", "true"),
                ("mirror.linkerd.io/mirrored-service", "true"),
            ],
            false,
        ),
        (
            &[
                ("mirror.linkerd.io/federated", "member"),
                ("mirror.linkerd.io/mirrored-service", "false"),
            ],
            false,
        ),
    ];
    for (labels, want) in cases {
        assert_eq!(is_exported(&labelled(labels)), want, "{labels:?}");
    }
    assert!(!is_exported(&Service::default()), "no labels at all");
}

/// What an MCS slice copies of a cluster's own slice: its IP endpoints with their conditions
/// and hostnames, and the ports that have a number.
#[test]
fn a_slice_gives_its_pods_and_their_ports() {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let slice = |address_type: &str| -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-x7", "namespace": "a"},
            "addressType": address_type,
            "endpoints": [
                {"addresses": ["198.19.0.9"], "hostname": "web-0", "conditions": {"ready": false, "serving": true}},
                {"addresses": ["198.19.0.10"]},
                {"addresses": ["fd00::1"]},
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "all"}, {"port": 53, "protocol": "UDP"}]
        }))
        .unwrap()
    };
    let p = read::pods(&slice("IPv4"));
    let shown: Vec<String> = p.ports.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["53/UDP", "http:8080/TCP"]);
    let ips: Vec<String> = (p.endpoints.iter())
        .map(|e| format!("{} {:?} {:?} {:?}", e.ip, e.ready, e.serving, e.hostname))
        .collect();
    // An IPv6 address in an IPv4 slice is not the slice's: left out.
    assert_eq!(
        ips,
        [
            r#"198.19.0.9 Some(false) Some(true) Some("web-0")"#,
            "198.19.0.10 None None None",
        ]
    );
    // A slice of FQDNs holds no address to copy.
    assert!(read::pods(&slice("FQDN")).endpoints.is_empty());
}
