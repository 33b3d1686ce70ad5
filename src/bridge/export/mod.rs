//! The export half: each ServiceExport (`multicluster.x-k8s.io`) turned into the label Linkerd's
//! service mirror selects Services by, and the export's conditions. [`judge`](mod@judge) decides, with no
//! API in it; [`controller`] reads the objects, and writes what the judge says.

mod controller;
mod judge;
mod read;
#[cfg(test)]
mod tests;

pub use controller::Config;
pub(super) use controller::run;
pub use judge::*;
