//! The distinct numbers of a list, each with the first line it is on, in 16 bytes a number:
//! one vector of (digits, line), sorted and rid of repeats whenever it is full (rather than
//! grown at once), so that a file that repeats its numbers costs its distinct numbers, not
//! its rows, and no set of seen numbers is kept beside it.

use crate::model::phone::E164;

/// The vector's first capacity, in numbers.
const FIRST_CAPACITY: usize = 1024;

/// A list's numbers as they are read.
#[derive(Debug, Default)]
pub struct Numbers {
    /// (digits, line): a sorted run without repeats, then what was pushed since.
    kept: Vec<(u64, u64)>,
    /// Numbers pushed, repeats included.
    pushed: u64,
}

impl Numbers {
    /// Keeps `number`, first seen on `line` unless it was on an earlier one.
    pub fn push(&mut self, number: &E164, line: u64) {
        if self.kept.len() == self.kept.capacity() {
            self.make_room();
        }
        self.kept.push((super::digits(number), line));
        self.pushed += 1;
    }

    /// Numbers pushed so far, repeats included.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// A full vector: repeats dropped; when that leaves it more than three quarters full
    /// it grows by half, so that at least a quarter of it is pushed before the next sort.
    /// It holds then at most twice the distinct numbers (3/2 of 4/3 of them): 32 bytes
    /// each at worst, while repeats fill it; 16 when the file repeats none.
    fn make_room(&mut self) {
        if self.kept.capacity() == 0 {
            self.kept.reserve_exact(FIRST_CAPACITY);
            return;
        }
        self.dedup();
        let capacity = self.kept.capacity();
        if self.kept.len() > capacity / 4 * 3 {
            self.kept.reserve_exact(capacity / 2);
        }
    }

    /// Sorted by digits, each number once, on its first line.
    fn dedup(&mut self) {
        // (digits, line) pairs sort by line within a number: the first one is kept.
        self.kept.sort_unstable();
        self.kept.dedup_by_key(|&mut (digits, _)| digits);
    }

    /// The distinct numbers as (digits, first line), in the order of the file, and how many
    /// rows repeated a number of an earlier one.
    pub fn finish(mut self) -> (Vec<(u64, u64)>, u64) {
        self.dedup();
        // Until recorded they take 16 bytes each, the room left to grow given back.
        self.kept.shrink_to_fit();
        self.kept.sort_unstable_by_key(|&(_, line)| line);
        let repeats = self.pushed - self.kept.len() as u64;
        (self.kept, repeats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(n: u64) -> E164 {
        crate::model::phone::normalize(&format!("+1555{n:07}"), Default::default())
            .expect("a number")
    }

    #[test]
    fn repeats_keep_their_first_line_and_the_file_order_stays() {
        let mut numbers = Numbers::default();
        // 5,000 rows over 700 numbers, each first on line n + 1, then again and again.
        for row in 0..5_000u64 {
            numbers.push(&number(row % 700), row + 1);
        }
        assert_eq!(numbers.pushed(), 5_000);
        let (kept, repeats) = numbers.finish();
        assert_eq!(repeats, 4_300);
        let expected: Vec<(u64, u64)> = (0..700).map(|n| (15_550_000_000 + n, n + 1)).collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn a_file_of_one_number_keeps_one_and_stays_small() {
        let mut numbers = Numbers::default();
        for row in 0..100_000u64 {
            numbers.push(&number(7), row + 2);
        }
        assert!(numbers.kept.capacity() <= FIRST_CAPACITY);
        let (kept, repeats) = numbers.finish();
        assert_eq!((kept, repeats), (vec![(15_550_000_007, 2)], 99_999));
    }
}
