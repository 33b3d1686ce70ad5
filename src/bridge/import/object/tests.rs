use serde_json::json;

use super::*;

#[test]
fn covers_asks_every_key_wanted_and_every_element_in_order() {
    let have = json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}, "extra": true});
    assert!(covers(&have, &json!({"b": {"c": [1, {"d": 2}]}})));
    assert_eq!(difference(&have, &json!({"b": {"c": [1, {"d": 2}]}})), None);
    assert!(!covers(&have, &json!({"b": {"c": [1]}})), "a list is whole");
    assert!(
        !covers(&have, &json!({"b": {"c": [{"d": 2}, 1]}})),
        "in order"
    );
    assert!(!covers(&have, &json!({"z": 1})));
    assert_eq!(
        difference(&have, &json!({"z": 1})).as_deref(),
        Some("/z (missing)")
    );
    assert_eq!(
        difference(&have, &json!({"b": {"c": [1, {"d": 5}]}})).as_deref(),
        Some("/b/c/1/d (2 is now 5)")
    );
}

#[test]
fn owned_keys_are_the_bridges_own_and_same_spec_wants_no_other_field() {
    let o = json!({"metadata": {"managedFields": [
        {"manager": crate::bridge::model::FIELD_MANAGER,
         "fieldsV1": {"f:metadata": {"f:labels": {"f:tier": {}, "f:app.kubernetes.io/managed-by": {}}}}},
        {"manager": crate::bridge::model::FIELD_MANAGER, "subresource": "status",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:no": {}}}}},
        {"manager": "someone", "fieldsV1": {"f:metadata": {"f:labels": {"f:theirs": {}}}}}
    ]}});
    let mut labels = owned_keys(&o, "labels");
    labels.sort();
    assert_eq!(labels, ["app.kubernetes.io/managed-by", "tier"]);
    assert!(owned_keys(&o, "annotations").is_empty());
    let want = json!({"type": "ClusterSetIP", "ports": []});
    assert!(same_spec(&json!({"type": "Headless", "ports": [1]}), &want));
    assert!(!same_spec(
        &json!({"type": "ClusterSetIP", "ports": [], "ips": ["198.18.0.1"]}),
        &want
    ));
    assert!(!same_spec(&json!(null), &want));
}
