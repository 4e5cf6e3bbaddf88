//! Per-open options: [`OpenOptions`], what one file is read with where it differs from the
//! engine's settings (a database opening its data files with its own block size and a fixed
//! window, beside logs it streams with the engine's `adaptive`).

use super::*;

/// How one file is opened: its policy, its largest window and request, `O_DIRECT` or not, and
/// the caller's block size. Unset options take the engine's settings. Options are consumed by
/// the open (a policy value is handed to the file). An example is in the crate's docs.
#[derive(Default)]
pub struct OpenOptions {
    pub(super) policy: PolicyChoice,
    pub(super) window_max_bytes: Option<u64>,
    pub(super) request_max_bytes: Option<u64>,
    pub(super) direct: Option<bool>,
    pub(super) block_size_bytes: Option<u64>,
    pub(super) record_latency: bool,
}

/// Which policy a file gets.
#[derive(Default)]
pub(super) enum PolicyChoice {
    /// The engine's.
    #[default]
    Engine,
    /// A registered policy, by name (`ahead::policy::names`).
    Named(String),
    /// A policy the caller made.
    Value(Box<dyn Policy>),
    /// Made by the caller from the settings the engine gives policies for this file.
    Maker(Box<dyn FnOnce(PolicyConfig) -> Box<dyn Policy> + Send>),
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let policy = match &self.policy {
            PolicyChoice::Engine => "the engine's".to_string(),
            PolicyChoice::Named(n) => n.clone(),
            PolicyChoice::Value(p) => format!("a value: {}", p.name()),
            PolicyChoice::Maker(_) => "made by the caller".to_string(),
        };
        f.debug_struct("OpenOptions")
            .field("policy", &policy)
            .field("window_max_bytes", &self.window_max_bytes)
            .field("request_max_bytes", &self.request_max_bytes)
            .field("direct", &self.direct)
            .field("block_size_bytes", &self.block_size_bytes)
            .field("record_latency", &self.record_latency)
            .finish()
    }
}

impl OpenOptions {
    /// Every option the engine's.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// A registered policy by name (`adaptive`, `linux-ondemand`, `fixed`, `none`, ...).
    pub fn policy(mut self, name: &str) -> OpenOptions {
        self.policy = PolicyChoice::Named(name.to_string());
        self
    }

    /// A policy of the caller's own (any [`Policy`]): it is told the device's estimate at
    /// open, as the engine's are.
    pub fn policy_value(mut self, policy: Box<dyn Policy>) -> OpenOptions {
        self.policy = PolicyChoice::Value(policy);
        self
    }

    /// A policy made by `make` from the settings the engine gives this file's policy
    /// (windows sized for its device, after the caps below).
    pub fn policy_maker(
        mut self,
        make: impl FnOnce(PolicyConfig) -> Box<dyn Policy> + Send + 'static,
    ) -> OpenOptions {
        self.policy = PolicyChoice::Maker(Box::new(make));
        self
    }

    /// The largest window read ahead, in bytes (rounded up to pages; the engine's: the
    /// device's `read_ahead_kb`, at least eight of its largest requests).
    pub fn window_max(mut self, bytes: u64) -> OpenOptions {
        self.window_max_bytes = Some(bytes);
        self
    }

    /// The largest request ahead, in bytes (rounded up to pages; the engine's: the device's
    /// `max_sectors_kb`).
    pub fn request_max(mut self, bytes: u64) -> OpenOptions {
        self.request_max_bytes = Some(bytes);
        self
    }

    /// Read with `O_DIRECT` (true, where the filesystem takes it) or through the kernel's
    /// page cache (false).
    pub fn direct(mut self, on: bool) -> OpenOptions {
        self.direct = Some(on);
        self
    }

    /// The caller's block size in bytes, a multiple of the 4 KiB page: every request the
    /// engine sends for this file starts and ends on a block boundary, so a database's 8 or
    /// 16 KiB block is never read in two requests.
    pub fn block_size(mut self, bytes: u64) -> OpenOptions {
        self.block_size_bytes = Some(bytes);
        self
    }

    /// Keep a latency histogram of this file's reads ([`FileStats::read_latency`]; off by
    /// default, as each costs tens of KiB; the engine keeps one of all reads regardless).
    pub fn record_latency(mut self, on: bool) -> OpenOptions {
        self.record_latency = on;
        self
    }

    /// Open `path` (a path, or a URL the engine reads) through `engine` with these options.
    ///
    /// # Errors
    /// As [`Engine::open`]; `InvalidInput` for an unknown policy name or a block size that is
    /// not a whole number of pages.
    pub fn open(self, engine: &Engine, path: impl AsRef<Path>) -> io::Result<File> {
        engine.open_with_options(path, self)
    }

    /// Pages per block, checked.
    pub(super) fn block_pages(&self) -> io::Result<u64> {
        match self.block_size_bytes {
            None => Ok(1),
            Some(b) if b > 0 && b % PAGE_SIZE == 0 && b <= 64 << 20 => Ok(b / PAGE_SIZE),
            Some(b) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "block size {b} bytes: it must be a whole number of {PAGE_SIZE}-byte pages, at most 64 MiB"
                ),
            )),
        }
    }
}
