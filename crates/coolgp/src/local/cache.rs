//! What a prediction needs from the memory under one model version, computed once and kept
//! until the memory, the kernel, q(W) or q(u) change: `G = L⁻¹ Ψ̄_B [n, m]` and
//! `z = L⁻¹ (y_B − μ_g(B)) [n]` (O(n m d' + n² m) to build), so a query point costs one
//! triangular solve and products with G.

use std::sync::{Arc, Mutex};

use faer::Mat;

use crate::error::Result;

/// The model version a [`MemoryPart`] was computed under: the memory's version and, exactly,
/// θ of q(W) and the q(u) posterior's `α` and `T1⁻¹`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Key {
    /// [`super::LocalModel`]'s version (bumped by every change of rows or kernel).
    pub version: u64,
    /// q(W), σ_s, σ_n flat.
    pub theta: Vec<f64>,
    /// `α` of q(u).
    pub alpha: Vec<f64>,
    /// `T1⁻¹` of q(u).
    pub t1_inv: Mat<f64>,
}

/// The memory's part of a prediction under one [`Key`].
#[derive(Debug)]
pub(crate) struct MemoryPart {
    key: Key,
    /// `G = L⁻¹ Ψ̄_B [n, m]` (unit-scale ψ̄1 of the memory's rows).
    pub g: Mat<f64>,
    /// `z = L⁻¹ (y_B − μ_g(B)) [n]`.
    pub z: Vec<f64>,
}

impl MemoryPart {
    /// A part computed under `key`.
    pub fn new(key: Key, g: Mat<f64>, z: Vec<f64>) -> Self {
        Self { key, g, z }
    }
}

/// The last [`MemoryPart`] (interior mutability: predictions take `&self`). A clone starts
/// empty.
#[derive(Debug, Default)]
pub(crate) struct Cache(Mutex<Option<Arc<MemoryPart>>>);

impl Clone for Cache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl Cache {
    /// The part for `key`: the kept one if its key is equal, else `compute(key)` (then kept).
    ///
    /// # Errors
    /// Those of `compute`.
    pub fn get_or(
        &self,
        key: Key,
        compute: impl FnOnce(Key) -> Result<MemoryPart>,
    ) -> Result<Arc<MemoryPart>> {
        if let Ok(kept) = self.0.lock() {
            if let Some(part) = kept.as_ref().filter(|p| p.key == key) {
                return Ok(part.clone());
            }
        }
        let part = Arc::new(compute(key)?);
        if let Ok(mut kept) = self.0.lock() {
            *kept = Some(part.clone());
        }
        Ok(part)
    }
}
