//! Reading the ranges of journal files sled's entries point at, by `pread`.
//! Owns: the files kept open (at most [`MAX_OPEN_JOURNAL_FILES`]). Must never:
//! write to a journal file, or read fewer bytes than a range asks for.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{JOURNAL_DIR, file_name};
use crate::local::{lock, storage};

/// Most journal files kept open; past it all are closed and opened again.
pub const MAX_OPEN_JOURNAL_FILES: usize = 64;

/// The journal files of one store, opened for reading as they are needed.
#[derive(Debug)]
pub struct JournalFiles {
    dir: PathBuf,
    open: Mutex<HashMap<u64, Arc<File>>>,
}

impl JournalFiles {
    pub fn new(store: &Path) -> Self {
        Self {
            dir: store.join(JOURNAL_DIR),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The journal file starting at global position `base`, opened once.
    fn file(&self, base: u64) -> io::Result<Arc<File>> {
        let mut open = lock(&self.open);
        if let Some(file) = open.get(&base) {
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(File::open(self.dir.join(file_name(base)))?);
        if open.len() >= MAX_OPEN_JOURNAL_FILES {
            open.clear();
        }
        open.insert(base, Arc::clone(&file));
        Ok(file)
    }

    /// Appends to `out` `len` bytes at `offset` of the file based at `base`.
    pub fn read_into(
        &self,
        base: u64,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let file = self.file(base)?;
        let start = out.len();
        out.resize(start + len, 0);
        storage::read_at(&file, &self.dir, &mut out[start..], offset)
            .inspect_err(|_| out.truncate(start))
    }
}
