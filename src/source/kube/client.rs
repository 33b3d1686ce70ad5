//! The Kubernetes client and API discovery: which kubeconfig, and which ServiceImport version
//! the API server serves.

use kube::discovery::ApiResource;

use super::Config;
use crate::source::object::MCS_GROUP;

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

/// The ServiceImport version to watch: the override, else v1beta1 if served, else v1alpha1.
pub async fn import_version(client: &kube::Client, wanted: Option<&str>) -> Result<String, String> {
    if let Some(v) = wanted {
        return Ok(v.to_string());
    }
    let group = kube::discovery::group(client, MCS_GROUP)
        .await
        .map_err(|e| {
            format!("API group {MCS_GROUP} not found (are the MCS CRDs installed?): {e}")
        })?;
    let served: Vec<&str> = group.versions().collect();
    ["v1beta1", "v1alpha1"]
        .into_iter()
        .find(|v| served.contains(v))
        .map(str::to_string)
        .ok_or_else(|| {
            format!("API group {MCS_GROUP} serves {served:?}, neither v1beta1 nor v1alpha1")
        })
}

/// The ServiceImport resource at `version`.
pub fn import_resource(version: &str) -> ApiResource {
    ApiResource {
        group: MCS_GROUP.into(),
        version: version.into(),
        api_version: format!("{MCS_GROUP}/{version}"),
        kind: "ServiceImport".into(),
        plural: "serviceimports".into(),
    }
}

/// The EndpointSlice resource (discovery.k8s.io/v1).
pub fn slice_resource() -> ApiResource {
    ApiResource {
        group: "discovery.k8s.io".into(),
        version: "v1".into(),
        api_version: "discovery.k8s.io/v1".into(),
        kind: "EndpointSlice".into(),
        plural: "endpointslices".into(),
    }
}

/// The Service resource (core/v1), for Linkerd's Services.
pub fn service_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Service".into(),
        plural: "services".into(),
    }
}
