//! The leaks on purpose (`leak_bytes_per_call`, `leak_fd_every`): the memory and the file
//! descriptors calls of a tool retain for as long as the target runs, so that what a soak
//! run samples from outside the process (RSS, open descriptors) has an exact truth.

use super::config::ServeConfig;
use super::stats::Stats;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

/// Leaked bytes are appended to chunks of this size, filled call by call: RSS then grows by
/// the bytes written, not by each call's own allocation as an allocator rounds it.
const CHUNK_BYTES: usize = 1 << 20;

/// What every leaked byte is set to: written, so that each page is resident, and non-zero,
/// so that no page can stay the kernel's shared zero page.
const FILL: u8 = 0xa5;

/// What a leaky descriptor opens.
const LEAKED_FILE: &str = "/dev/null";

pub(crate) struct Leaks {
    bytes_per_call: usize,
    fd_every: u64,
    /// Calls of a tool counted for `fd_every` (only while it is on).
    calls: AtomicU64,
    /// The leaked bytes: every chunk full but the last.
    chunks: Mutex<Vec<Chunk>>,
    /// The leaked descriptors, never closed.
    files: Mutex<Vec<File>>,
}

impl Leaks {
    pub(super) fn new(cfg: &ServeConfig) -> Leaks {
        Leaks {
            bytes_per_call: cfg.leak_bytes_per_call,
            fd_every: cfg.leak_fd_every,
            calls: AtomicU64::new(0),
            chunks: Mutex::default(),
            files: Mutex::default(),
        }
    }

    /// One call of a tool: retains its bytes, and on every `fd_every`th call a descriptor;
    /// both counted in `stats` as they are retained. With both knobs off it takes no lock.
    pub(super) fn on_tool_call(&self, stats: &Stats) {
        if self.bytes_per_call > 0 {
            Stats::add(&stats.leaked_bytes, self.retain_bytes() as u64);
        }
        if self.fd_every > 0 {
            let call = self.calls.fetch_add(1, Relaxed) + 1;
            // A descriptor that cannot be opened (the process's limit reached) is not
            // counted: `leaked_fds` stays what the process really holds.
            if call.is_multiple_of(self.fd_every)
                && let Ok(file) = File::open(LEAKED_FILE)
            {
                self.files
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(file);
                Stats::add(&stats.leaked_fds, 1);
            }
        }
    }

    /// Appends `bytes_per_call` written bytes to the chunks; returns how many it wrote
    /// (fewer only when no memory could be mapped). Each turn either starts a chunk or fills
    /// at least one byte of the last one, so it ends within
    /// `2 * (bytes_per_call / CHUNK_BYTES + 2)` turns.
    fn retain_bytes(&self) -> usize {
        let mut chunks = self.chunks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut left = self.bytes_per_call;
        while left > 0 {
            if chunks.last().is_none_or(|c| c.filled == c.bytes.len()) {
                match Chunk::map() {
                    Some(chunk) => chunks.push(chunk),
                    None => break,
                }
            }
            let chunk = chunks
                .last_mut()
                .expect("a chunk with room was just ensured");
            let take = left.min(chunk.bytes.len() - chunk.filled);
            chunk.bytes[chunk.filled..chunk.filled + take].fill(FILL);
            chunk.filled += take;
            left -= take;
        }
        self.bytes_per_call - left
    }
}

/// [`CHUNK_BYTES`] of memory never given back, and how many of them are written.
struct Chunk {
    bytes: &'static mut [u8],
    filled: usize,
}

impl Chunk {
    /// An anonymous mapping of its own, outside the allocator (mimalloc backs its arenas
    /// with transparent huge pages: RSS would grow 2 MiB at a time), with huge pages refused,
    /// so that each page written adds one page to RSS. `None` when nothing can be mapped.
    #[cfg(target_os = "linux")]
    fn map() -> Option<Chunk> {
        use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap_anonymous};
        let flags = ProtFlags::READ | ProtFlags::WRITE;
        // SAFETY: a new private anonymous mapping aliases no memory of the process, and it is
        // never unmapped, so the slice over it is valid for as long as the process runs.
        unsafe {
            let at =
                mmap_anonymous(std::ptr::null_mut(), CHUNK_BYTES, flags, MapFlags::PRIVATE).ok()?;
            // A kernel without transparent huge pages refuses the advice, and maps small
            // pages anyway.
            let _ = madvise(at, CHUNK_BYTES, Advice::LinuxNoHugepage);
            Some(Chunk {
                bytes: std::slice::from_raw_parts_mut(at.cast::<u8>(), CHUNK_BYTES),
                filled: 0,
            })
        }
    }

    /// Zeroed memory from the allocator, leaked: its pages are resident once written.
    #[cfg(not(target_os = "linux"))]
    fn map() -> Option<Chunk> {
        Some(Chunk {
            bytes: vec![0; CHUNK_BYTES].leak(),
            filled: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaks(leak_bytes_per_call: usize, leak_fd_every: u64) -> Leaks {
        Leaks::new(&ServeConfig {
            leak_bytes_per_call,
            leak_fd_every,
            ..ServeConfig::default()
        })
    }

    #[test]
    fn bytes_fill_whole_chunks_and_are_written() {
        // 700 KiB a call does not divide 1 MiB: calls straddle chunks.
        let per_call = 700 << 10;
        let (l, stats) = (leaks(per_call, 0), Stats::default());
        for _ in 0..5 {
            l.on_tool_call(&stats);
        }
        let chunks = l.chunks.lock().unwrap();
        let held: usize = chunks.iter().map(|c| c.filled).sum();
        assert_eq!(held, 5 * per_call);
        assert_eq!(chunks.len(), (5 * per_call).div_ceil(CHUNK_BYTES));
        assert!(
            chunks[..chunks.len() - 1]
                .iter()
                .all(|c| c.filled == CHUNK_BYTES)
        );
        for c in chunks.iter() {
            assert!(c.bytes[..c.filled].iter().all(|b| *b == FILL));
            assert!(c.bytes[c.filled..].iter().all(|b| *b == 0));
        }
        assert_eq!(stats.snapshot().leaked_bytes, 5 * per_call as u64);
        assert!(l.files.lock().unwrap().is_empty());
    }

    #[test]
    fn every_nth_call_keeps_a_descriptor() {
        let (l, stats) = (leaks(0, 10), Stats::default());
        for _ in 0..25 {
            l.on_tool_call(&stats);
        }
        assert_eq!(l.files.lock().unwrap().len(), 2);
        assert_eq!(stats.snapshot().leaked_fds, 2);
        assert!(l.chunks.lock().unwrap().is_empty());
    }

    #[test]
    fn off_retains_nothing() {
        let (l, stats) = (leaks(0, 0), Stats::default());
        for _ in 0..100 {
            l.on_tool_call(&stats);
        }
        assert!(l.chunks.lock().unwrap().is_empty());
        assert!(l.files.lock().unwrap().is_empty());
        let s = stats.snapshot();
        assert_eq!((s.leaked_bytes, s.leaked_fds), (0, 0));
    }
}
