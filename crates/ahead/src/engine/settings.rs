//! The engine's settings by name: one table ([`SETTINGS`]) of every setting a user gives as
//! `key=value` text, whichever door it comes in by. The CLI's flags (`ahead cat --budget 1g`
//! is `budget=1g`, `-o window_max=4m` any other), [`EngineBuilder::set`] and
//! [`EngineBuilder::options`], Python's keyword arguments and a mount's `-o` options all call
//! it, and it calls the builder's own methods: a setting means the same by every door, and its
//! value is parsed and checked here, once.
//!
//! Sizes are bytes (text takes `k`, `m`, `g` suffixes of 1024, as [`crate::units::parse_size`]);
//! a window or request size becomes pages, rounded up, where a file's policy is made, and
//! nowhere else. Switches take `true`/`false` (`on`/`off`, `yes`/`no`, `1`/`0`).
//!
//! Keys not in the table are refused with the list of those that are; a remote store's own
//! settings (`region`, `endpoint`, ...) go by [`EngineBuilder::remote_option`], or here with
//! the prefix `remote.` (`remote.region=eu-west-1`), and are checked when an object is opened.

use super::*;

/// One setting: its key, what it is, and how its text is applied to a builder.
pub struct Setting {
    /// The key, as `key=value` gives it.
    pub name: &'static str,
    /// What it sets, for help texts.
    pub about: &'static str,
    apply: fn(EngineBuilder, &str) -> Result<EngineBuilder, String>,
}

/// Every setting of an engine by name.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "budget",
        about: "the most memory the cache holds, bytes (256m by default)",
        apply: |b, v| Ok(b.budget(size(v)?)),
    },
    Setting {
        name: "policy",
        about: "the readahead policy for files opened (adaptive by default)",
        apply: |b, v| {
            policy::maker(v)?;
            Ok(b.policy(v))
        },
    },
    Setting {
        name: "backend",
        about: "the I/O backend: auto (io_uring if it works), or a registered one",
        apply: |b, v| Ok(b.backend(v.parse()?)),
    },
    Setting {
        name: "window_max",
        about: "the largest readahead window, bytes (the device's read_ahead_kb, at least eight of its largest requests, by default)",
        apply: |b, v| Ok(b.window_max(at_least(size(v)?, 1024, "1k")?)),
    },
    Setting {
        name: "request_max",
        about: "the largest single request, bytes (the device's max_sectors_kb by default)",
        apply: |b, v| Ok(b.request_max(at_least(size(v)?, PAGE_SIZE, "4k (one page)")?)),
    },
    Setting {
        name: "device",
        about: "what the device is taken for until measured: nvme, hdd, remote, or a profile `ahead calibrate` wrote (a .json file)",
        apply: |b, v| Ok(b.device_model(crate::device::DeviceModel::named(v)?)),
    },
    Setting {
        name: "threads",
        about: "threads of the threads backend (32 by default)",
        apply: |b, v| match v.parse::<usize>() {
            Ok(n @ 1..=4096) => Ok(b.threads(n)),
            _ => Err(format!("'{v}' is not a number of threads from 1 to 4096")),
        },
    },
    Setting {
        name: "direct",
        about: "read with O_DIRECT where the filesystem allows (true by default)",
        apply: |b, v| Ok(b.direct(switch(v)?)),
    },
    Setting {
        name: "leases",
        about: "hold a read lease on each local file, so a cached read needs no fstat (true by default)",
        apply: |b, v| Ok(b.leases(switch(v)?)),
    },
    Setting {
        name: "drop_behind",
        about: "read files over a quarter of the budget through a ring (false by default; ahead cat: true)",
        apply: |b, v| Ok(b.drop_behind(switch(v)?)),
    },
    Setting {
        name: "pretouch",
        about: "fault in the whole budget at start (false by default)",
        apply: |b, v| Ok(b.pretouch(switch(v)?)),
    },
    Setting {
        name: "fault_ahead",
        about: "fault in the cache's memory a little ahead of its growth (true by default)",
        apply: |b, v| Ok(b.fault_ahead(switch(v)?)),
    },
    Setting {
        name: "keep_memory",
        about: "keep the cache's memory once touched when its pages are dropped (false by default)",
        apply: |b, v| Ok(b.keep_memory(switch(v)?)),
    },
    Setting {
        name: "budget_over_memory",
        about: "take a budget above the memory the process can have (false by default)",
        apply: |b, v| Ok(b.allow_budget_over_memory(switch(v)?)),
    },
];

/// The prefix of a remote store's setting given among the engine's.
pub const REMOTE_PREFIX: &str = "remote.";

fn size(v: &str) -> Result<u64, String> {
    crate::units::parse_size(v).map(|b| b.0)
}

fn at_least(bytes: u64, least: u64, says: &str) -> Result<u64, String> {
    if bytes < least {
        Err(format!("{bytes} bytes is too small: at least {says}"))
    } else {
        Ok(bytes)
    }
}

/// A switch's text: `true`/`false`, `on`/`off`, `yes`/`no`, `1`/`0`.
pub(crate) fn switch(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(format!("'{v}' is not true or false")),
    }
}

impl EngineBuilder {
    /// Apply one setting by name, as text: `set("budget", "1g")`, `set("window_max",
    /// "4194304")`. The error names the key and says what it takes (a remote setting's value
    /// is never in it).
    ///
    /// # Errors
    /// An unknown key (the message lists the known ones) or a value it does not take.
    pub fn set(self, key: &str, value: &str) -> Result<Self, String> {
        self.set_as(key, value, key)
    }

    /// [`set`](Self::set), with a refused value named as the user gave it (`label`: a CLI flag
    /// such as `--ra-max` for `window_max`).
    ///
    /// # Errors
    /// As [`set`](Self::set).
    pub fn set_as(self, key: &str, value: &str, label: &str) -> Result<Self, String> {
        if let Some(remote) = key.strip_prefix(REMOTE_PREFIX) {
            return Ok(self.remote_option(remote, value));
        }
        match SETTINGS.iter().find(|s| s.name == key) {
            Some(s) => (s.apply)(self, value.trim()).map_err(|e| format!("{label}: {e}")),
            None => Err(format!(
                "unknown setting '{key}'; known: {} (and {REMOTE_PREFIX}KEY for a remote store's own)",
                SETTINGS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Apply one setting written `key=value` (`ahead cat -o`), as [`set`](Self::set) takes
    /// it.
    ///
    /// # Errors
    /// As [`set`](Self::set), or a setting written without `=`.
    pub fn set_pair(self, pair: &str) -> Result<Self, String> {
        match pair.split_once('=') {
            Some((k, v)) => self.set(k.trim(), v),
            None => Err(format!("'{pair}': a setting is written KEY=VALUE")),
        }
    }

    /// Apply settings written `key=value,key=value` (a mount's `-o`, an environment
    /// variable): each as [`set_pair`](Self::set_pair) takes it, in order.
    ///
    /// # Errors
    /// The first setting refused, or one written without `=`.
    pub fn options(self, text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|kv| !kv.is_empty())
            .try_fold(self, Self::set_pair)
    }
}
