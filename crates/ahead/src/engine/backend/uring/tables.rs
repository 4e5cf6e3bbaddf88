//! The ring's registered tables (see the module comment): files named by slot, and the
//! arena registered as buffers a slab at a time as reads reach it.

use super::*;

/// Entries of io_uring's table of registered buffers at most (`IORING_MAX_REG_BUFFERS`).
pub(super) const MAX_BUFFERS: usize = 1 << 14;
/// Slots of the ring's table of registered files at most: files read at once through the ring
/// that are named by slot (more name their descriptor). The kernel also holds the table to the
/// process's descriptor limit (`RLIMIT_NOFILE`), often 1,024.
pub(super) const FILE_SLOTS: u32 = 4096;

/// The ring's table of registered files (see the module comment): the slots free.
pub(super) struct FixedFiles {
    pub(super) free: Mutex<Vec<u32>>,
}

/// A file's slot in the ring's table, given back when the file is dropped. Kept in the file's
/// `backend_file`; a file that found no slot keeps `NoSlot` there instead.
pub(super) struct RingFile {
    pub(super) slot: u32,
    pub(super) ring: Weak<Shared>,
}

/// Kept by a file that found the table full: its reads name its descriptor.
pub(super) struct NoSlot;

/// `file`'s slot in the ring's table, if it has one.
pub(super) fn ring_slot(file: &FileData) -> Option<u32> {
    file.backend_file
        .get()
        .and_then(|f| f.downcast_ref::<RingFile>())
        .map(|f| f.slot)
}

impl FixedFiles {
    pub(super) fn free(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give `file` a slot, if it has had none and one is free.
    pub(super) fn ensure(&self, shared: &Arc<Shared>, file: &FileData) {
        let Some(fd) = file.source.fd() else {
            return;
        };
        let _ = file.backend_file.get_or_init(|| {
            let Some(slot) = self.free().pop() else {
                return Box::new(NoSlot);
            };
            match shared
                .ring
                .submitter()
                .register_files_update(slot, &[fd.as_raw_fd()])
            {
                Ok(_) => Box::new(RingFile {
                    slot,
                    ring: Arc::downgrade(shared),
                }),
                Err(_) => {
                    self.free().push(slot);
                    Box::new(NoSlot)
                }
            }
        });
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        let Some(shared) = self.ring.upgrade() else {
            return; // the ring is gone, and its table with it
        };
        // -1 empties the slot: the kernel lets go of the file (reads still in flight hold
        // their own reference). A slot that could not be emptied is not used again.
        if shared
            .ring
            .submitter()
            .register_files_update(self.slot, &[-1])
            .is_ok()
        {
            if let Some(files) = &shared.files {
                files.free().push(self.slot);
            }
        }
    }
}

/// The process's soft limit on open descriptors (`RLIMIT_NOFILE`), or 1,024 if it cannot be
/// read.
pub(super) fn descriptor_limit() -> u32 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    u32::try_from(limit.rlim_cur).unwrap_or(u32::MAX)
}

/// The arena as the ring's registered buffers, registered a buffer at a time as reads reach
/// it.
pub(super) struct FixedBuffers {
    pub(super) base: usize,
    pub(super) bytes: usize,
    pub(super) slab: usize,
    /// Whether buffer `k` (slabs `k` and `k + 1`) is registered. Changed under the submit
    /// lock.
    pub(super) registered: Box<[AtomicBool]>,
    /// Set when a registration was refused: every read is a plain one from then on.
    pub(super) refused: AtomicBool,
    /// Held while a buffer is registered, so two submitters do not register one twice.
    pub(super) registering: Mutex<()>,
}

impl FixedBuffers {
    /// The index of the buffer that would hold `[buf, buf + len)`.
    pub(super) fn buffer_for(&self, buf: *mut u8, len: usize) -> Option<usize> {
        let at = (buf as usize).checked_sub(self.base)?;
        let k = at / self.slab;
        (at + len <= self.range_of(k).1 && k < self.registered.len()).then_some(k)
    }

    /// The arena's bytes buffer `k` covers: slabs `k` and `k + 1`.
    pub(super) fn range_of(&self, k: usize) -> (usize, usize) {
        let start = k * self.slab;
        (start, (start + 2 * self.slab).min(self.bytes))
    }

    /// Register the buffer that holds `[buf, buf + len)` if no read has reached it yet; whether
    /// this call registered it. Called before the submit lock is taken: registering pins the
    /// buffer's memory, which costs milliseconds the first time the arena's memory is touched,
    /// and a reader taking back a queued read must not wait behind it.
    pub(super) fn ensure(
        &self,
        ring: &IoUring,
        buf: *mut u8,
        len: usize,
        note: &Mutex<Option<Fallback>>,
    ) -> bool {
        if self.refused.load(Ordering::Relaxed) {
            return false;
        }
        let Some(k) = self.buffer_for(buf, len) else {
            return false;
        };
        // Not the first buffer: reads into the arena's first slab stay plain, so a cache that
        // holds a few pages does not pin two slabs (16 MiB) for them.
        if k == 0 {
            return false;
        }
        self.register(ring, k, note)
    }

    /// Register buffer `k`, unless it is already; whether this call did (or tried: a refusal
    /// took its time too).
    pub(super) fn register(
        &self,
        ring: &IoUring,
        k: usize,
        note: &Mutex<Option<Fallback>>,
    ) -> bool {
        if self.refused.load(Ordering::Relaxed) || self.registered[k].load(Ordering::Acquire) {
            return false;
        }
        let _one_at_a_time = self.registering.lock().unwrap_or_else(|p| p.into_inner());
        if self.registered[k].load(Ordering::Acquire) {
            return false;
        }
        let (start, end) = self.range_of(k);
        // Fault the memory in first, outside the ring: registering pins it, and the kernel
        // faults in what is not there yet (zeroing it, on a virtual machine perhaps getting
        // it back from the host first) while it holds the ring's lock, so every other
        // thread's submissions and completions would wait behind it. Failure is not an
        // error here: the registration faults in what is left, as it did.
        // SAFETY: the range lies within the arena; MADV_POPULATE_WRITE changes no byte.
        unsafe {
            libc::madvise(
                (self.base + start) as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_WRITE,
            );
        }
        let iov = libc::iovec {
            iov_base: (self.base + start) as *mut libc::c_void,
            iov_len: end - start,
        };
        // SAFETY: the iovec lies within the arena, which outlives the ring (the cache that owns
        // it is held by the completer, which this backend holds until the ring is dropped).
        match unsafe {
            ring.submitter()
                .register_buffers_update(k as u32, &[iov], None)
        } {
            Ok(()) => self.registered[k].store(true, Ordering::Release),
            Err(e) => {
                self.refused.store(true, Ordering::Relaxed);
                *note.lock().unwrap_or_else(|p| p.into_inner()) = Some(Fallback::new(
                    FallbackKind::FixedBuffers,
                    format!(
                        "io_uring fixed buffers: registering the cache's memory was refused ({e}): plain reads from then on (raise the memlock limit to use them)"
                    ),
                ));
            }
        }
        true
    }

    /// Unregister every buffer that reaches the arena's bytes `[from, to)` (slab multiples):
    /// buffer `k` spans slabs `k` and `k + 1`, so from `from / slab - 1` to the one starting
    /// in the range's last slab. No read is in flight or queued into them (the cache has no
    /// slot in use in the range, and no read in flight within a slab of it: a neighbour's
    /// cached pages stay mapped and are copied from the arena, not through the buffer), and
    /// the next read into one registers it again, pinning the memory it then maps.
    pub(super) fn unregister(&self, ring: &IoUring, from: usize, to: usize) {
        let _one_at_a_time = self.registering.lock().unwrap_or_else(|p| p.into_inner());
        let first = (from / self.slab).saturating_sub(1);
        let last = to.div_ceil(self.slab).min(self.registered.len());
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        for k in first..last {
            if !self.registered[k].load(Ordering::Acquire) {
                continue;
            }
            // SAFETY: an empty entry clears the table's slot `k`; no read uses it (above).
            match unsafe {
                ring.submitter()
                    .register_buffers_update(k as u32, &[empty], None)
            } {
                Ok(()) => self.registered[k].store(false, Ordering::Release),
                Err(_) => {
                    // Still pinned: reads would land in memory the arena no longer maps after
                    // the cache gives it back, so no fixed read from here on.
                    self.refused.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// The index of the registered buffer holding `[buf, buf + len)`, if it is registered.
    pub(super) fn index(&self, buf: *mut u8, len: usize) -> Option<u16> {
        let k = self.buffer_for(buf, len)?;
        if !self.registered[k].load(Ordering::Acquire) || self.refused.load(Ordering::Relaxed) {
            return None;
        }
        u16::try_from(k).ok()
    }
}
