//! Sources of services. Each turns Kubernetes objects into `model` values and sends `Update`s to
//! the zone builder; `object` (the shapes read and their validation), `store` (what a source keeps)
//! and `policy` (what imported data may say) are what they share.

pub mod file;
pub mod kube;
pub mod object;
pub mod policy;
pub mod store;
