use super::*;

/// The API server's answer to a create in a namespace being deleted, as its namespace
/// lifecycle admission builds it (k8s.io/apiserver v0.37.2
/// `pkg/admission/plugin/namespace/lifecycle/admission.go`: `admission.NewForbidden` with the
/// cause `NamespaceTerminating`), and an admission policy's refusal of the same create.
#[test]
fn a_namespace_being_deleted_is_no_refusal_of_the_ports_service() {
    let status = |causes: serde_json::Value| -> kube::core::Status {
        serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "services \"web-federated-ports\" is forbidden: unable to create new content in namespace shop because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "web-federated-ports", "kind": "services", "causes": causes},
            "code": 403
        }))
        .unwrap()
    };
    let terminating = status(serde_json::json!([{
        "reason": "NamespaceTerminating",
        "message": "namespace shop is being terminated",
        "field": "metadata.namespace"
    }]));
    assert!(namespace_terminating(&terminating));
    assert!(
        REFUSED.contains(&terminating.code),
        "else it never reached the refusal arm"
    );

    let denied = status(serde_json::json!([]));
    assert!(
        !namespace_terminating(&denied),
        "a policy's 403 is a refusal"
    );
    let mut invalid = terminating.clone();
    invalid.code = 422;
    assert!(!namespace_terminating(&invalid));
}
