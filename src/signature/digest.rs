//! HMAC over a sequence of byte slices, for each supported hash, with constant-time checks.

use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};

use crate::settings::Algorithm;

/// Length in bytes of a tag made with `algorithm`.
pub fn digest_len(algorithm: Algorithm) -> usize {
    match algorithm {
        Algorithm::Sha1 => 20,
        Algorithm::Sha256 => 32,
        Algorithm::Sha512 => 64,
    }
}

fn keyed<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> M {
    // HMAC takes keys of any length, so this never fails.
    let mut mac = <M as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    for part in parts {
        mac.update(part);
    }
    mac
}

/// HMAC-`algorithm` of the concatenated `parts`.
pub fn compute(algorithm: Algorithm, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    match algorithm {
        Algorithm::Sha1 => keyed::<Hmac<sha1::Sha1>>(key, parts)
            .finalize()
            .into_bytes()
            .to_vec(),
        Algorithm::Sha256 => keyed::<Hmac<sha2::Sha256>>(key, parts)
            .finalize()
            .into_bytes()
            .to_vec(),
        Algorithm::Sha512 => keyed::<Hmac<sha2::Sha512>>(key, parts)
            .finalize()
            .into_bytes()
            .to_vec(),
    }
}

/// Whether `tag` is the HMAC of `parts`, compared in constant time; a tag of the wrong
/// length never matches.
pub fn verify_tag(algorithm: Algorithm, key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    if tag.len() != digest_len(algorithm) {
        return false;
    }
    match algorithm {
        Algorithm::Sha1 => keyed::<Hmac<sha1::Sha1>>(key, parts)
            .verify_slice(tag)
            .is_ok(),
        Algorithm::Sha256 => keyed::<Hmac<sha2::Sha256>>(key, parts)
            .verify_slice(tag)
            .is_ok(),
        Algorithm::Sha512 => keyed::<Hmac<sha2::Sha512>>(key, parts)
            .verify_slice(tag)
            .is_ok(),
    }
}

/// The first of `tags` that is the HMAC of `parts`, each compared in constant time. The
/// parts are hashed once, whatever the number of tags: a request that repeats a signature
/// header costs one finalization per value, not a pass over its body.
pub fn first_match(
    algorithm: Algorithm,
    key: &[u8],
    parts: &[&[u8]],
    tags: &[&[u8]],
) -> Option<usize> {
    fn first<M: Mac + KeyInit + Clone>(
        key: &[u8],
        parts: &[&[u8]],
        tags: &[&[u8]],
    ) -> Option<usize> {
        let mac = keyed::<M>(key, parts);
        tags.iter()
            .position(|tag| mac.clone().verify_slice(tag).is_ok())
    }
    match algorithm {
        Algorithm::Sha1 => first::<Hmac<sha1::Sha1>>(key, parts, tags),
        Algorithm::Sha256 => first::<Hmac<sha2::Sha256>>(key, parts, tags),
        Algorithm::Sha512 => first::<Hmac<sha2::Sha512>>(key, parts, tags),
    }
}
