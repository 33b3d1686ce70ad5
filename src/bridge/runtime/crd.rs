//! The custom resources the bridge uses: which version of each the API server serves, or what
//! to install when it serves none.

use std::time::Duration;

use kube::discovery::ApiResource;

/// How often the API server is asked again for a custom resource it did not serve.
pub const CRD_RECHECK: Duration = Duration::from_secs(10);

/// A custom resource the bridge reads or writes, at the first of `versions` the API server
/// serves.
pub struct Crd {
    pub group: &'static str,
    /// The versions the half can use, preferred first.
    pub versions: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    /// What to do when the API server serves none of them.
    pub install: &'static str,
}

/// `crd` at the first of its versions the API server serves, or why there is none.
pub async fn resource(client: &kube::Client, crd: &Crd) -> Result<ApiResource, String> {
    let missing = |detail: String| {
        format!(
            "the API server serves no {} ({}, {}): {}; {detail}",
            crd.kind,
            crd.group,
            crd.versions.join(" or "),
            crd.install
        )
    };
    let group = kube::discovery::group(client, crd.group)
        .await
        .map_err(|e| missing(e.to_string()))?;
    let served: Vec<&str> = group.versions().collect();
    let version = crd
        .versions
        .iter()
        .find(|v| {
            served.contains(v)
                && group
                    .versioned_resources(v)
                    .iter()
                    .any(|(r, _)| r.kind == crd.kind)
        })
        .ok_or_else(|| missing(format!("the group serves {served:?} without it")))?;
    Ok(ApiResource {
        group: crd.group.into(),
        version: (*version).into(),
        api_version: format!("{}/{version}", crd.group),
        kind: crd.kind.into(),
        plural: crd.plural.into(),
    })
}
