//! What the model *is*: the unit kernel, the shared vocabulary, the projection q(W), psi
//! statistics, the natural parameters of q(u) and prediction.

pub mod input_range;
pub mod kernel;
pub mod natural;
pub mod predict;
pub mod projection;
pub mod psi;
pub mod vocabulary;

pub use crate::fingerprint::Fingerprint;
pub use natural::{Excess, NaturalParams, Posterior};
pub use predict::Prediction;
pub use projection::{Projection, ProjectionGrad};
pub use vocabulary::Vocabulary;
