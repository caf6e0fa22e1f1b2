//! Encoding into a per-thread buffer kept between calls, so that a value
//! of any size costs one allocation at its final size and one copy,
//! rather than a buffer that starts small and is reallocated (and copied)
//! each time it doubles. Records and frames are encoded on every append
//! and every frame sent, and a frame of a few kilobytes grew five times.
//!
//! Owns: one buffer per thread. Must never: hold a buffer past
//! [`MAX_KEPT_BUFFER_BYTES`] after the call that grew it (a large record
//! must not pin its memory), or be borrowed across an `.await` (the
//! closure is synchronous).

use std::cell::RefCell;

/// Largest buffer a thread keeps between calls, in bytes.
pub const MAX_KEPT_BUFFER_BYTES: usize = 64 * 1024;

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What `encode` wrote into an empty buffer, copied out at its size.
/// Reentrant: an `encode` that itself calls this gets a buffer of its own.
pub fn encode_exact(encode: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut buffer = BUFFER
        .with(|scratch| {
            scratch
                .try_borrow_mut()
                .map(|mut kept| std::mem::take(&mut *kept))
        })
        .unwrap_or_default();
    buffer.clear();
    encode(&mut buffer);
    let exact = buffer.as_slice().to_vec();
    if buffer.capacity() <= MAX_KEPT_BUFFER_BYTES {
        BUFFER.with(|scratch| {
            if let Ok(mut kept) = scratch.try_borrow_mut()
                && kept.capacity() < buffer.capacity()
            {
                *kept = buffer;
            }
        });
    }
    exact
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_exact_and_the_buffer_is_kept_only_within_its_bound() {
        let small = encode_exact(|buffer| buffer.extend_from_slice(b"abc"));
        assert_eq!((small.as_slice(), small.capacity()), (&b"abc"[..], 3));
        // What was written before does not leak into the next value.
        assert_eq!(encode_exact(|buffer| buffer.push(7)), vec![7]);
        let kept = || BUFFER.with(|scratch| scratch.borrow().capacity());
        assert!(kept() >= 3 && kept() <= MAX_KEPT_BUFFER_BYTES);
        let large = encode_exact(|buffer| buffer.resize(MAX_KEPT_BUFFER_BYTES + 1, 1));
        assert_eq!(large.len(), MAX_KEPT_BUFFER_BYTES + 1);
        assert!(kept() <= MAX_KEPT_BUFFER_BYTES);
        // Nested: the inner call gets a buffer of its own.
        let outer = encode_exact(|buffer| {
            let inner = encode_exact(|inner| inner.extend_from_slice(b"in"));
            buffer.extend_from_slice(b"out-");
            buffer.extend_from_slice(&inner);
        });
        assert_eq!(outer, b"out-in");
    }
}
