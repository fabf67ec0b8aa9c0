//! The fuzz input as a stream of small choices: every read past the end yields 0, so any byte
//! string is a valid program.

/// A cursor over the fuzz input.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((first, rest)) => {
                self.data = rest;
                *first
            }
            None => 0,
        }
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }

    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Up to `max` raw bytes.
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let len = usize::from(self.byte()).min(max).min(self.data.len());
        let (taken, rest) = self.data.split_at(len);
        self.data = rest;
        taken
    }
}
