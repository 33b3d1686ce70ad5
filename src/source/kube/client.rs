//! The Kubernetes client and API discovery: which kubeconfig, and which version of each kind the
//! API server serves.

use kube::discovery::ApiResource;

use super::Config;
use crate::model::ObjectKind;
use crate::source::AnyKind;
use crate::source::object::Resource;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read kubeconfig {path}: {error}")]
    Kubeconfig {
        path: String,
        error: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes configuration found (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account): {0}"
    )]
    Infer(kube::config::InferConfigError),
    #[error("cannot use the kubeconfig: {0}")]
    Config(kube::config::KubeconfigError),
    #[error("cannot create the Kubernetes client: {0}")]
    Client(kube::Error),
}

/// A client from `--kubeconfig`/`--context`, or inferred (KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn client(config: &Config) -> Result<kube::Client, ClientError> {
    let options = kube::config::KubeConfigOptions {
        context: config.context.clone(),
        ..Default::default()
    };
    let cfg = match (&config.kubeconfig, &config.context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|error| {
                ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    error,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(ClientError::Config)?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(ClientError::Config)?,
        (None, None) => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    kube::Client::try_from(cfg).map_err(ClientError::Client)
}

/// Why a kind's API cannot be watched (yet).
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("API group {group} not found (is the CRD of {kind} installed?): {error}")]
    NotServed {
        group: &'static str,
        kind: ObjectKind,
        error: kube::Error,
    },
    #[error("API group {group} serves {served:?}, none of {wanted:?} for {kind}")]
    NoVersion {
        group: &'static str,
        kind: ObjectKind,
        served: Vec<String>,
        wanted: &'static [&'static str],
    },
}

/// The resource to watch `kind` as: at the version it names, else at its only version (for a
/// required kind: the API server is not asked), else at the first of its versions the API
/// server serves. A kind that is not required is always looked for, since it may not be served.
pub async fn discover(
    client: &kube::Client,
    kind: &dyn AnyKind,
) -> Result<ApiResource, DiscoveryError> {
    let r = kind.resource();
    if let Some(v) = kind.version() {
        return Ok(api_resource(kind.kind(), &r, v));
    }
    if let ([only], true) = (r.versions, r.required) {
        return Ok(api_resource(kind.kind(), &r, only));
    }
    let group = kube::discovery::group(client, r.group)
        .await
        .map_err(|error| DiscoveryError::NotServed {
            group: r.group,
            kind: kind.kind(),
            error,
        })?;
    let served: Vec<&str> = group.versions().collect();
    r.versions
        .iter()
        .find(|v| served.contains(v))
        .map(|v| api_resource(kind.kind(), &r, v))
        .ok_or_else(|| DiscoveryError::NoVersion {
            group: r.group,
            kind: kind.kind(),
            served: served.iter().map(|s| s.to_string()).collect(),
            wanted: r.versions,
        })
}

/// `kind`'s resource `r` at `version`.
pub fn api_resource(kind: ObjectKind, r: &Resource, version: &str) -> ApiResource {
    ApiResource {
        group: r.group.into(),
        version: version.into(),
        api_version: r.api_version(version),
        kind: kind.label().into(),
        plural: r.plural.into(),
    }
}
