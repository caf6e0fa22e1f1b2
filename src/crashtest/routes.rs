//! The campaign's load balancer: every request (and every Statewire
//! attach) goes to one of the live instances, chosen at random, as a
//! balancer without sticky sessions would send it.
//!
//! Owns: the list of live instances and the choice. Must never: send a
//! request to an instance the campaign killed (the list changes with
//! every start and kill).

use std::sync::{Arc, Mutex};

use super::Rng;

/// The live instances' base URLs, shared by every client.
#[derive(Clone)]
pub struct Routes {
    inner: Arc<Mutex<(Vec<String>, Rng)>>,
}

impl Routes {
    pub fn new(seed: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new((Vec::new(), Rng::new(seed)))),
        }
    }

    /// The instances now live.
    pub fn set(&self, bases: Vec<String>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.0 = bases;
        }
    }

    /// One live instance, at random (empty when none is: the request
    /// then fails as one to a dead instance would).
    pub fn pick(&self) -> String {
        let Ok(mut inner) = self.inner.lock() else {
            return String::new();
        };
        let (bases, rng) = &mut *inner;
        if bases.is_empty() {
            return String::new();
        }
        let at = rng.below(bases.len() as u64) as usize;
        bases[at].clone()
    }
}
