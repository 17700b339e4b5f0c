//! The data directory belongs to one process at a time: a lock file (`ironplane.lock`, holding the
//! owner's pid) is locked for as long as the server runs. A second process on the same directory
//! refuses to start and names the holder, instead of writing beside it into the same store.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

const LOCK_FILE: &str = "ironplane.lock";

/// A held lock on a data directory; released when dropped (or when the process exits).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Locks `dir` for this process, or says which process holds it.
pub fn lock(dir: &Path) -> Result<DataDirLock, String> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                "another process".to_string()
            } else {
                format!("another ironplane process (pid {holder})")
            };
            return Err(format!(
                "the data directory {} is in use by {who}; stop it or choose another --data-dir",
                dir.display()
            ));
        }
        Err(TryLockError::Error(e)) => {
            return Err(format!("locking {}: {e}", path.display()));
        }
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.flush());
    written.map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(DataDirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_names_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = lock(dir.path()).expect("the first lock");
        let err = lock(dir.path()).expect_err("the directory is held");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        lock(dir.path()).expect("free again once released");
    }
}
