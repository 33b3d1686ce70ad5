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
