//! Values a process keeps for itself, built at first use in each process: what a child forked
//! from it must build again rather than inherit (a runtime's threads, a lock a thread of the
//! parent may have held at the fork, a thread signals are sent to). See [`PerProcess`].

/// A value of this process's own, built at its first use in each process: a child forked after
/// the parent built it (its threads not there, its locks perhaps held by threads that are not
/// either) builds its own, and the parent's copy is left as it is, never used or dropped.
pub(crate) struct PerProcess<T: 'static> {
    /// The process that built the value, and the value; leaked, so never freed.
    slot: std::sync::atomic::AtomicPtr<(u32, T)>,
}

impl<T: 'static> PerProcess<T> {
    /// None built yet.
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess {
            slot: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn current(&self, pid: u32) -> Option<&'static T> {
        let seen = self.slot.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: a non-null slot points at a leaked box, never freed (see `get_or_init`).
        unsafe { seen.as_ref() }.and_then(|(owner, value)| (*owner == pid).then_some(value))
    }

    /// This process's value, if it has been built.
    pub(crate) fn get(&self) -> Option<&'static T> {
        self.current(std::process::id())
    }

    /// This process's value, built with `init` if it has none yet.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &'static T {
        use std::sync::atomic::Ordering;
        let pid = std::process::id();
        if let Some(value) = self.current(pid) {
            return value;
        }
        let seen = self.slot.load(Ordering::Acquire);
        let fresh = Box::into_raw(Box::new((pid, init())));
        match self
            .slot
            .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `fresh` is now the slot's, leaked: it lives as long as the process.
            Ok(_) => unsafe { &(*fresh).1 },
            Err(_) => {
                // Another thread of this process built one first: that one is kept.
                // SAFETY: `fresh` was never shared; this takes its box back to drop it.
                drop(unsafe { Box::from_raw(fresh) });
                self.current(pid)
                    .expect("the value another thread of this process built")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_built_once_per_process_and_anew_in_a_forked_child() {
        static VALUE: PerProcess<u32> = PerProcess::new();
        let parent = *VALUE.get_or_init(std::process::id);
        assert_eq!(*VALUE.get_or_init(|| 0), parent, "built once in a process");
        // SAFETY: the child only reads atomics, allocates (glibc's malloc is fork-safe) and
        // exits with `_exit`, running nothing of the parent's.
        match unsafe { libc::fork() } {
            0 => {
                let fresh = VALUE.get().is_none()
                    && *VALUE.get_or_init(std::process::id) == std::process::id();
                // SAFETY: ends the child at once, as a forked child of a threaded parent must.
                unsafe { libc::_exit(if fresh { 0 } else { 1 }) }
            }
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            child => {
                let mut status = 0;
                // SAFETY: waits for the child just forked; `status` is a valid out pointer.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "the child saw the parent's value, or built none"
                );
            }
        }
        assert_eq!(
            *VALUE.get_or_init(|| 0),
            parent,
            "the parent's is untouched"
        );
    }
}
