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

#[test]
fn an_import_an_earlier_bridge_wrote_becomes_applied_with_the_same_fields() {
    let o = json!({"metadata": {"resourceVersion": "41", "managedFields": [
        {"manager": FIELD_MANAGER, "operation": "Update", "apiVersion": "multicluster.x-k8s.io/v1beta1",
         "time": "2026-12-05T10:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:ips": {}, "f:type": {}}}},
        {"manager": FIELD_MANAGER, "operation": "Apply", "apiVersion": "multicluster.x-k8s.io/v1beta1",
         "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:clusters": {}}}},
        {"manager": "kubectl-label", "operation": "Update", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:theirs": {}}}}}
    ]}});
    let patch = legacy_upgrade(&o).expect("an upgrade");
    assert_eq!(
        patch[0],
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": "41"}),
        "at the version read"
    );
    let records = patch[1]["value"].as_array().unwrap();
    // Others' records, the status record included, are kept as they are.
    assert_eq!(records.len(), 3);
    assert_eq!(records[0]["subresource"], "status");
    assert_eq!(records[1]["manager"], "kubectl-label");
    // The bridge's record of the object is now an Apply holding the same fields.
    assert_eq!(records[2]["operation"], "Apply");
    assert_eq!(records[2]["manager"], FIELD_MANAGER);
    assert_eq!(
        records[2]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:ips": {}, "f:type": {}}})
    );
    let upgraded = json!({"metadata": {"managedFields": records}});
    assert_eq!(legacy_upgrade(&upgraded), None, "upgraded once");
    let mut labels = owned_keys(&upgraded, "labels");
    labels.sort();
    assert_eq!(labels, ["team"]);
}
