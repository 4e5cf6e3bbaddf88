//! `ahead stats MOUNT`: the statistics of a directory `ahead mount` serves, read from the
//! mount's own file (`.ahead/stats.json`), so any program, or a shell, can read them too.

use crate::*;

/// The hidden directory at a mount's root that holds the mount's own files.
pub(crate) const STATS_DIR: &str = ".ahead";
/// Its one file: the engine's and the mount's counters, as JSON, as of its read.
pub(crate) const STATS_FILE: &str = "stats.json";

/// `ahead stats MOUNT`: what the mount's `.ahead/stats.json` holds, as a few lines or as JSON.
pub(crate) fn cmd_stats(a: StatsArgs) -> Result<String, Failure> {
    let path = a.mountpoint.join(STATS_DIR).join(STATS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        runtime(format!(
            "{}: {e} (is {} served by `ahead mount`?)",
            path.display(),
            a.mountpoint.display()
        ))
    })?;
    if a.json {
        return Ok(text);
    }
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| runtime(format!("{}: {e}", path.display())))?;
    let (m, e) = (&v["mount"], &v["engine"]);
    let mib = |x: &serde_json::Value| x.as_u64().unwrap_or(0) as f64 / (1 << 20) as f64;
    let pages_mib =
        |x: &serde_json::Value| x.as_u64().unwrap_or(0) as f64 * 4096.0 / (1 << 20) as f64;
    Ok(format!(
        "source        {}\n\
         open files    {} ({} opens, {} lookups, {} listings)\n\
         reads         {} ({:.1} MiB, {} errors)\n\
         engine        {} policy, {} backend, budget {:.0} MiB, resident {:.1} MiB\n\
         fetched       {:.1} MiB in {} requests ({} ahead), {:.1} MiB never read\n\
         read latency  p50 {} us, p99 {} us\n",
        v["source"].as_str().unwrap_or("?"),
        m["open_handles"],
        m["opens"],
        m["lookups"],
        m["listings"],
        m["reads"],
        mib(&m["bytes_read"]),
        m["read_errors"],
        e["policy"].as_str().unwrap_or("?"),
        e["backend"].as_str().unwrap_or("?"),
        mib(&e["budget_bytes"]),
        pages_mib(&e["resident_pages"]),
        pages_mib(&e["pages_read"]),
        e["requests"],
        e["ahead_requests"],
        pages_mib(&e["wasted_pages"]),
        e["read_latency"]["p50_us"],
        e["read_latency"]["p99_us"],
    ))
}
