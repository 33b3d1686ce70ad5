use super::*;

#[test]
fn slice_names_differ_where_dashes_would_make_them_equal() {
    assert_ne!(
        slice_name("a-b", "c", Family::V4),
        slice_name("a", "b-c", Family::V4)
    );
    assert_ne!(
        slice_name("a", "b", Family::V4),
        slice_name("a", "b", Family::V6)
    );
    assert!(slice_name("web", "east.eu", Family::V4).starts_with("web-east-eu-"));
}

#[test]
fn the_ports_service_is_named_after_the_federated_one_and_always_a_service_name() {
    assert_eq!(ports_service_name("web-federated"), "web-federated-ports");
    // Linkerd's federated Service may take the whole 63 characters; the bridge's must too.
    let long = format!("{}-federated", "a".repeat(53));
    let other = format!("{}-federated", "a".repeat(52));
    let (a, b) = (ports_service_name(&long), ports_service_name(&other));
    assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
    assert_ne!(a, b);
    assert!(
        a.starts_with(&"a".repeat(48)) && a.ends_with("-ports"),
        "{a}"
    );
    // A cut that would end in a dash leaves none before the hash.
    let dashed = format!("{}-{}-federated", "b".repeat(47), "c".repeat(20));
    assert!(!ports_service_name(&dashed).contains("--"));
}
