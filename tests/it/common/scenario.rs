//! The waits that are a test's scenario, each kind in one place: a slow client's bytes
//! ([`trickle`]), a client's pause before its next request ([`pace`]), the moment of a crash
//! ([`Moments`]). None of them waits for the daemon to do something: that is a signal
//! (`TestApp::drain`, `settle`, a gauge of [`Metrics`](outreach_sync::metrics::Metrics)) or
//! [`within`](super::within).

use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt as _};

/// A slow client: writes `parts` one after another, `pace` apart (the first at once), until
/// they are all written or the daemon stops taking them (the write's error).
pub async fn trickle<W: AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &[&[u8]],
    pace: Duration,
) -> std::io::Result<()> {
    for (n, part) in parts.iter().enumerate() {
        if n > 0 {
            tokio::time::sleep(pace).await;
        }
        writer.write_all(part).await?;
    }
    Ok(())
}

/// A client's pause before its next request or connection: the rate of a load or a flood,
/// or a client backing off after a refusal, as real ones do.
pub async fn pace(pause: Duration) {
    tokio::time::sleep(pause).await;
}

/// The moments of crashes (a SIGKILL, an abort), drawn from a seed so that a test runs the
/// same every time, and the victims among several.
pub struct Moments {
    draws: SplitMix64,
    /// The earliest moment.
    from: Duration,
    /// Moments fall in `from..from + spread`.
    spread: Duration,
}

impl Moments {
    pub fn new(seed: u64, from: Duration, spread: Duration) -> Self {
        Self {
            draws: SplitMix64(seed),
            from,
            spread,
        }
    }

    /// Lets what runs go on until the next moment drawn, when the caller crashes it.
    pub async fn next(&mut self) {
        let spread = u64::try_from(self.spread.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let moment = self.from + Duration::from_micros(self.draws.next() % spread);
        tokio::time::sleep(moment).await;
    }

    /// One of `n` victims (`0..n`).
    pub fn victim(&mut self, n: usize) -> usize {
        let n = u64::try_from(n).expect("a count").max(1);
        usize::try_from(self.draws.next() % n).expect("below a count")
    }
}

/// splitmix64: a small deterministic generator.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
