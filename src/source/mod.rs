//! Sources of services. Each turns Kubernetes objects into `model` values and sends `Update`s to
//! the zone builder; `objects` holds what they share.

pub mod file;
pub mod kube;
pub mod objects;
pub mod policy;
