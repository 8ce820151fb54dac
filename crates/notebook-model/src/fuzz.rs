//! Fuzz input read as decisions: the byte source behind the `check_*` functions of this crate
//! and of the domain crates above it (`execution-tracker`, `colab-setup`), which add their own
//! decoders on top of it.

/// Reads fuzz bytes as a stream of small decisions; past the end every byte is 0.
pub struct ByteSource<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> ByteSource<'a> {
    /// A source that reads `data` from its first byte.
    pub fn new(data: &'a [u8]) -> Self {
        ByteSource { data, offset: 0 }
    }

    /// Whether every byte of the input has been read.
    pub fn is_empty(&self) -> bool {
        self.offset >= self.data.len()
    }

    /// The next byte, or 0 past the end.
    #[expect(
        clippy::should_implement_trait,
        reason = "a byte source never ends, so it is no Iterator"
    )]
    pub fn next(&mut self) -> u8 {
        let byte = self.data.get(self.offset).copied().unwrap_or(0);
        self.offset += 1;
        byte
    }

    /// A yes or no: whether the next byte is odd.
    pub fn flag(&mut self) -> bool {
        self.next() % 2 == 1
    }

    /// One of `items`, chosen by the next byte.
    pub fn pick<'p, T>(&mut self, items: &'p [T]) -> &'p T {
        &items[usize::from(self.next()) % items.len()]
    }

    /// One of `items`, chosen by the next byte, as an owned string.
    pub fn pick_text(&mut self, items: &[&str]) -> String {
        (*self.pick(items)).to_owned()
    }

    /// `decode` applied to the rest when the next byte is odd, else nothing.
    pub fn optional<T>(&mut self, decode: impl FnOnce(&mut Self) -> T) -> Option<T> {
        self.flag().then(|| decode(self))
    }
}
