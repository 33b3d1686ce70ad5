use super::*;
use crate::source::linkerd::ANNOTATION_FQ_NAME;

fn key(ns: &str, name: &str) -> Key {
    (ns.into(), name.into())
}

fn svc(ns: &str, name: &str, annotations: &[(&str, &str)]) -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some(ns.into());
    s.metadata.name = Some(name.into());
    s.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    s
}

#[test]
fn a_linkerd_service_is_judged_under_the_services_it_names_or_its_own_name() {
    let host = svc(
        "shop",
        "db-0-west",
        &[(ANNOTATION_FQ_NAME, "db-0.db.shop.svc.cluster.local")],
    );
    assert_eq!(keys_of_service(&host), [key("shop", "db")]);
    // One that names none is judged under its own name, so its problem is said.
    let bare = svc("shop", "odd-federated", &[]);
    assert_eq!(keys_of_service(&bare), [key("shop", "odd-federated")]);
}

fn said(messages: &[&str], unusable: &[(&str, &str)]) -> Said<String> {
    Said {
        messages: messages.iter().map(|m| m.to_string()).collect(),
        unusable: unusable
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        foreign: (0, 0),
        refused: 0,
    }
}

#[test]
fn a_message_is_said_once_while_any_service_holds_it_and_forgotten_after() {
    let mut t = Told::default();
    let (a, b) = (key("shop", "a"), key("shop", "b"));
    assert_eq!(t.hold(&a, said(&["m1"], &[("shop", "x")])), ["m1"]);
    assert_eq!(
        t.hold(&a, said(&["m1"], &[("shop", "x")])),
        Vec::<String>::new()
    );
    // Another service finding the same problem does not say it again.
    assert_eq!(t.hold(&b, said(&["m1", "m2"], &[])), ["m2"]);
    assert_eq!(t.hold(&a, Said::default()), Vec::<String>::new());
    assert!(
        !t.by_key.contains_key(&a),
        "nothing kept for a service with nothing to say"
    );
    assert_eq!(t.held.get("m1"), Some(&1));
    assert_eq!(t.hold(&b, Said::default()), Vec::<String>::new());
    assert!(
        t.held.is_empty() && t.by_key.is_empty(),
        "bounded by what is wrong now"
    );
    // Gone and back: said again.
    assert_eq!(t.hold(&a, said(&["m1"], &[])), ["m1"]);
}
