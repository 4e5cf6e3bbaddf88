//! The strace log reader: one call per line (joined where another thread split it), each open
//! file description followed from its `openat` through its `dup`s to its last `close` (the
//! module comment of `trace` says what is read and what is skipped).
//!
//! A line is `[TID|[pid TID]] [TIME] NAME(ARGS) = RESULT [<DURATION>]`: the thread id of `-f`,
//! a time of `-t`, `-tt`, `-ttt` or `-r`, and the duration of `-T` are all optional. Strings
//! and `-y` paths are unescaped as strace escapes them (`\n`, octal, and the hex of `-x` and
//! `-xx`). A relative path is resolved against the working directory where the log tells it
//! (`-y`'s `AT_FDCWD</dir>`, a traced `chdir`, or the `# cwd:` line `ahead trace` writes),
//! and kept as written where it does not.

use super::*;

/// One open file description: what `openat` made, shared by the descriptors `dup`ed from it.
pub(super) struct Description {
    pub(super) path: String,
    /// Whether its reads are counted: a file's, not a pipe's, socket's or `/dev`'s.
    pub(super) counted: bool,
    pub(super) file: Option<u32>,
    pub(super) handle: Option<u32>,
    pub(super) pos: u64,
    /// Descriptors that refer to it.
    pub(super) refs: u32,
}

/// A syscall line split into its parts.
pub(super) struct Call<'a> {
    pub(super) name: &'a str,
    pub(super) args: Vec<&'a str>,
    pub(super) result: &'a str,
}

/// The traced program's descriptors and working directory, as the log tells them. One table
/// per trace: a process that inherits a descriptor is followed, two processes with different
/// files on one number are told apart by the `-y` path.
#[derive(Default)]
pub(super) struct Descriptors {
    fds: HashMap<i64, usize>,
    descriptions: Vec<Option<Description>>,
    cwd: Option<String>,
}

/// Reads not kept, by why.
#[derive(Default)]
pub(super) struct Skipped {
    failed: u64,
    not_files: u64,
    unknown: u64,
}

/// Parse an strace log (see the module comment), whatever its first line looks like.
pub fn parse_strace(input: impl BufRead) -> Result<Trace, TraceError> {
    let mut b = Builder::default();
    let mut fds = Descriptors::default();
    let mut skipped = Skipped::default();
    let mut unfinished: HashMap<String, String> = HashMap::new();
    // A line that failed to parse: an error, unless it was the log's last (cut short).
    let mut bad: Option<TraceError> = None;
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| read_error(n, e))?;
        let text = line.trim_end();
        if text.is_empty() {
            continue;
        }
        if let Some(e) = bad.take() {
            return Err(e);
        }
        if let Some(cwd) = text.strip_prefix("# cwd: ") {
            fds.cwd = Some(cwd.to_string());
            continue;
        }
        if let Some(ns) = text.strip_prefix("# program_ns: ") {
            let ns = ns.trim().parse::<u64>().map_err(|_| {
                err_at(
                    n,
                    format!("program_ns is not a number of nanoseconds: {ns}"),
                )
            })?;
            b.program_ns = Some(ns);
            continue;
        }
        if text.starts_with('#') {
            continue;
        }
        let (tid, rest) = strip_prefixes(text);
        if rest.starts_with("+++") || rest.starts_with("---") || rest.starts_with("strace:") {
            continue;
        }
        let joined;
        let rest = if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            unfinished.insert(tid, head.to_string());
            continue;
        } else if let Some(after) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = after.split_once(" resumed>") else {
                bad = Some(err_at(n, "malformed '<... resumed>' line"));
                continue;
            };
            let Some(head) = unfinished.remove(&tid) else {
                continue; // the start was before the trace began
            };
            joined = format!("{head}{tail}");
            joined.as_str()
        } else {
            rest
        };
        let Some(call) = split_call(rest) else {
            bad = Some(err_at(
                n,
                format!(
                    "not an strace line: '{}' (ahead replay reads strace logs, as `ahead trace` writes them, and CSV traces with a header)",
                    shorten(rest)
                ),
            ));
            continue;
        };
        // A call that splits is whole: what is wrong with it is an error wherever it is.
        apply_call(&call, &mut b, &mut fds, &mut skipped).map_err(|m| err_at(n, m))?;
    }
    if let Some(e) = bad {
        b.notes.push(format!(
            "{e}: the log's last line, cut short (was it still being written?): skipped"
        ));
    }
    let count = |n: u64, what: &str| (n > 0).then(|| format!("{n} {what}"));
    let dropped: Vec<String> = [
        count(skipped.failed, "failed reads (the call returned an error)"),
        count(
            skipped.not_files,
            "reads of pipes, sockets, terminals, /dev, /proc and /sys",
        ),
        count(
            skipped.unknown,
            "reads of descriptors opened before the trace began, with no path to tell their file (record with strace -y, as `ahead trace` does)",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !dropped.is_empty() {
        b.notes.push(format!("skipped: {}", dropped.join("; ")));
    }
    Ok(b.finish())
}

/// The thread id (`-f`'s `TID ` or `[pid TID] `) and the line without it and without a
/// timestamp (`-t`, `-tt`, `-ttt`, `-r`).
fn strip_prefixes(text: &str) -> (String, &str) {
    let mut rest = text.trim_start();
    let mut tid = String::new();
    if let Some(after) = rest.strip_prefix("[pid") {
        if let Some((id, tail)) = after.split_once(']') {
            tid = id.trim().to_string();
            rest = tail.trim_start();
        }
    } else if let Some((first, tail)) = rest.split_once(' ') {
        if !first.is_empty() && first.bytes().all(|c| c.is_ascii_digit()) {
            tid = first.to_string();
            rest = tail.trim_start();
        }
    }
    if let Some((first, tail)) = rest.split_once(' ') {
        let time_like = first
            .bytes()
            .all(|c| c.is_ascii_digit() || c == b':' || c == b'.')
            && first.bytes().any(|c| c == b':' || c == b'.');
        if time_like {
            rest = tail.trim_start();
        }
    }
    (tid, rest)
}

pub(super) fn shorten(s: &str) -> String {
    if s.len() <= 80 {
        return s.to_string();
    }
    let mut end = 80;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Split `name(arg, arg, ...) = result` respecting quoted strings and brackets.
pub(super) fn split_call(s: &str) -> Option<Call<'_>> {
    let open = s.find('(')?;
    let name = &s[..open];
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut in_str = false;
    let mut start = open + 1;
    let mut i = open + 1;
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'[' | b'{' | b'(' => depth += 1,
                b']' | b'}' => depth = depth.saturating_sub(1),
                b'<' if depth == 0 => {
                    // A -y path such as 3</a/b>: skip to its closing '>'.
                    let close = s[i..].find('>')?;
                    i += close;
                }
                b')' if depth == 0 => {
                    let arg = s[start..i].trim();
                    if !arg.is_empty() {
                        args.push(arg);
                    }
                    let tail = s[i + 1..].trim_start();
                    let result = tail.strip_prefix('=')?.trim();
                    return Some(Call { name, args, result });
                }
                b')' => depth = depth.saturating_sub(1),
                b',' if depth == 0 => {
                    args.push(s[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// A string as strace printed it (without its quotes), unescaped: `\n`, `\t`, `\"`, `\\`,
/// octal `\NNN` and hex `\xNN` (`-x`, `-xx`). Bytes that are not UTF-8 become U+FFFD.
pub(super) fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let hex = &s[i..(i + 2).min(s.len())];
                match u8::from_str_radix(hex, 16) {
                    Ok(v) if hex.len() == 2 => {
                        out.push(v);
                        i += 2;
                    }
                    _ => out.extend_from_slice(b"\\x"),
                }
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut k = 0;
                while k < 2 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    k += 1;
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `3</a/b>` -> (3, Some("/a/b")); `3` -> (3, None). The path unescaped.
pub(super) fn parse_fd(arg: &str) -> Result<(i64, Option<String>), String> {
    let (num, path) = match arg.find('<') {
        Some(i) => {
            let end = arg
                .rfind('>')
                .filter(|&e| e > i)
                .ok_or_else(|| format!("bad descriptor '{}'", shorten(arg)))?;
            (&arg[..i], Some(unescape(&arg[i + 1..end])))
        }
        None => (arg, None),
    };
    let fd = num
        .trim()
        .parse()
        .map_err(|_| format!("bad descriptor '{}'", shorten(arg)))?;
    Ok((fd, path))
}

pub(super) fn parse_num(arg: &str, what: &str) -> Result<u64, String> {
    arg.trim()
        .parse()
        .map_err(|_| format!("{what} should be a number, not '{}'", shorten(arg)))
}

/// The call's return value, or `None` if it failed (`-1 ENOENT ...`) or is unknown (`?`).
pub(super) fn result_value(result: &str) -> Option<i64> {
    let first = result.split_whitespace().next()?;
    let first = first.split('<').next()?;
    first.parse::<i64>().ok().filter(|&v| v >= 0)
}

/// The `-y` path in a result such as `3</a/b> <0.000012>` (only in its first word: `-T`'s
/// duration is not a path).
fn result_path(result: &str) -> Option<String> {
    let first = result.split_whitespace().next()?;
    parse_fd(first).ok()?.1
}

/// Whether reads of `path` are a file's: not a pipe's, socket's or other anonymous object's
/// (`pipe:[123]`, `socket:[9]`, `anon_inode:[eventfd]`), nor a device's or a pseudo-file's.
pub(super) fn counted_path(path: &str) -> bool {
    let anonymous =
        !path.starts_with('/') && path.contains(":[") || path.starts_with("anon_inode:");
    let pseudo = ["/dev/", "/proc/", "/sys/"]
        .iter()
        .any(|p| path.starts_with(p));
    !path.is_empty() && !anonymous && !pseudo
}

/// `path` made absolute against `base` where it is relative and a base is known, with `.` and
/// `..` taken out as the kernel walks them (lexically).
fn resolve(base: Option<&str>, path: &str) -> String {
    let joined = match base {
        Some(dir) if !path.starts_with('/') => format!("{}/{path}", dir.trim_end_matches('/')),
        _ => return path.to_string(),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

impl Descriptors {
    fn get(&self, fd: i64) -> Option<usize> {
        self.fds.get(&fd).copied()
    }

    fn description(&mut self, d: usize) -> &mut Description {
        self.descriptions[d]
            .as_mut()
            .expect("a descriptor refers to a live description")
    }

    /// Descriptor `fd` now refers to description `d` (closing what it referred to before).
    fn bind(&mut self, b: &mut Builder, fd: i64, d: usize) {
        self.close(b, fd);
        self.description(d).refs += 1;
        self.fds.insert(fd, d);
    }

    /// A new description of `path` on `fd`.
    fn open(&mut self, b: &mut Builder, fd: i64, path: String) -> usize {
        let d = self.descriptions.len();
        self.descriptions.push(Some(Description {
            counted: counted_path(&path),
            path,
            file: None,
            handle: None,
            pos: 0,
            refs: 0,
        }));
        self.bind(b, fd, d);
        d
    }

    /// Descriptor `fd` is closed: its description ends with its last descriptor.
    fn close(&mut self, b: &mut Builder, fd: i64) {
        let Some(d) = self.fds.remove(&fd) else {
            return;
        };
        let desc = self.description(d);
        desc.refs -= 1;
        if desc.refs == 0 {
            if let Some(handle) = desc.handle {
                b.events.push(Event::Close { handle });
            }
            self.descriptions[d] = None;
        }
    }

    /// The description `fd` refers to, as far as the log tells: the one it was opened or
    /// `dup`ed to, unless a `-y` path says it now names another file (a descriptor of another
    /// process, or opened before the trace began), in which case it is followed by that path.
    fn for_fd(&mut self, b: &mut Builder, fd: i64, path: Option<String>) -> Option<usize> {
        match (self.get(fd), path) {
            (Some(d), Some(p)) if self.description(d).path != p => Some(self.open(b, fd, p)),
            (Some(d), _) => Some(d),
            (None, Some(p)) => Some(self.open(b, fd, p)),
            (None, None) => None,
        }
    }

    /// The directory a relative path of a call on `dirfd` (an `openat`'s first argument) is
    /// resolved against.
    fn base_of(&mut self, dirfd_arg: &str) -> Option<String> {
        if let Some(rest) = dirfd_arg.strip_prefix("AT_FDCWD") {
            let shown = rest
                .strip_prefix('<')
                .and_then(|r| r.strip_suffix('>'))
                .map(unescape);
            return shown.or_else(|| self.cwd.clone());
        }
        let (fd, path) = parse_fd(dirfd_arg).ok()?;
        path.or_else(|| {
            let d = self.get(fd)?;
            Some(self.description(d).path.clone())
        })
    }
}

/// The trace handle of description `d` (opened at its first read), its file, and its
/// position; `None` (counted in `skipped`) if its reads are not a file's.
fn handle_of(
    d: usize,
    b: &mut Builder,
    fds: &mut Descriptors,
    skipped: &mut Skipped,
) -> Option<(u32, u32, u64)> {
    let desc = fds.description(d);
    if !desc.counted {
        skipped.not_files += 1;
        return None;
    }
    let file = *desc.file.get_or_insert_with(|| b.file(&desc.path));
    let handle = match desc.handle {
        Some(h) => h,
        None => {
            let h = b.open(file);
            desc.handle = Some(h);
            h
        }
    };
    Some((handle, file, desc.pos))
}

pub(super) fn apply_call(
    call: &Call<'_>,
    b: &mut Builder,
    fds: &mut Descriptors,
    skipped: &mut Skipped,
) -> Result<(), String> {
    let need = |n: usize| -> Result<(), String> {
        if call.args.len() < n {
            Err(format!(
                "{} with {} arguments, expected at least {n}",
                call.name,
                call.args.len()
            ))
        } else {
            Ok(())
        }
    };
    match call.name {
        "openat" | "open" | "creat" | "openat2" => {
            let Some(fd) = result_value(call.result) else {
                return Ok(());
            };
            let at = usize::from(call.name == "openat" || call.name == "openat2");
            need(at + 1)?;
            // With -y the result carries the path the kernel opened: `= 3</a/b>`.
            let path = match result_path(call.result) {
                Some(p) => p,
                None => {
                    let raw = unescape(call.args[at].trim().trim_matches('"'));
                    let base = if at == 1 {
                        fds.base_of(call.args[0])
                    } else {
                        fds.cwd.clone()
                    };
                    resolve(base.as_deref(), &raw)
                }
            };
            fds.open(b, fd, path);
        }
        "dup" | "dup2" | "dup3" | "fcntl" | "fcntl64" => {
            let Some(new) = result_value(call.result) else {
                return Ok(());
            };
            if call.name.starts_with("fcntl") {
                need(2)?;
                if !call.args[1].trim().starts_with("F_DUPFD") {
                    return Ok(());
                }
            }
            need(1)?;
            let (old, path) = parse_fd(call.args[0])?;
            if let Some(d) = fds.for_fd(b, old, path) {
                if fds.get(new) != Some(d) {
                    fds.bind(b, new, d);
                }
            } else if let Some(p) = result_path(call.result) {
                fds.open(b, new, p);
            } else {
                // Unknown on both sides: whatever `new` named is closed by the dup.
                fds.close(b, new);
            }
        }
        "chdir" => {
            need(1)?;
            if result_value(call.result).is_some() {
                let dir = unescape(call.args[0].trim().trim_matches('"'));
                fds.cwd = Some(resolve(fds.cwd.clone().as_deref(), &dir));
            }
        }
        "fchdir" => {
            need(1)?;
            if result_value(call.result).is_some() {
                let (fd, path) = parse_fd(call.args[0])?;
                let dir = path.or_else(|| {
                    let d = fds.get(fd)?;
                    Some(fds.description(d).path.clone())
                });
                if dir.is_some() {
                    fds.cwd = dir;
                }
            }
        }
        "read" | "pread64" | "preadv" | "preadv2" | "readv" => {
            need(match call.name {
                "read" | "readv" => 3,
                _ => 4,
            })?;
            let (fd, path) = parse_fd(call.args[0])?;
            let Some(got) = result_value(call.result) else {
                skipped.failed += 1;
                return Ok(());
            };
            let got = got as u64;
            let Some(d) = fds.for_fd(b, fd, path) else {
                skipped.unknown += 1;
                return Ok(());
            };
            let Some((handle, file, pos)) = handle_of(d, b, fds, skipped) else {
                return Ok(());
            };
            // The kernel transfers at most MAX_RW_COUNT in one call, whatever was asked.
            let asked = |i: usize, what: &str| {
                parse_num(call.args[i], what).map(|n| n.min(crate::units::MAX_READ_BYTES))
            };
            let (offset, len, moves) = match call.name {
                "read" => (pos, asked(2, "read's count")?, true),
                "readv" => (pos, got, true),
                "pread64" => (
                    parse_num(call.args[3], "pread64's offset")?,
                    asked(2, "pread64's count")?,
                    false,
                ),
                // preadv(fd, iov, iovcnt, offset[, flags]): the offset is the fourth.
                _ => (parse_num(call.args[3], "the offset")?, got, false),
            };
            if got > len {
                return Err(format!(
                    "{} returned {got} bytes, more than the {len} it asked for",
                    call.name
                ));
            }
            check_extent(offset, len)?;
            b.read(handle, file, offset, len, got);
            if moves {
                fds.description(d).pos = pos.saturating_add(got);
            }
        }
        "fadvise64" | "readahead" => {
            need(if call.name == "readahead" { 3 } else { 4 })?;
            if result_value(call.result).is_none() {
                return Ok(());
            }
            let (fd, path) = parse_fd(call.args[0])?;
            let Some(d) = fds.for_fd(b, fd, path) else {
                return Ok(());
            };
            let Some((handle, _, _)) = handle_of(d, b, fds, &mut Skipped::default()) else {
                return Ok(());
            };
            let offset = parse_num(call.args[1], "the offset")?;
            let len = parse_num(call.args[2], "the length")?;
            let start_page = offset / crate::units::PAGE_SIZE;
            let pages = if len == 0 {
                u64::MAX / 2 // to the end of the file
            } else {
                offset
                    .saturating_add(len)
                    .div_ceil(crate::units::PAGE_SIZE)
                    .saturating_sub(start_page)
            };
            let advice = if call.name == "readahead" {
                "POSIX_FADV_WILLNEED"
            } else {
                call.args[3].trim()
            };
            let hint = match advice {
                "POSIX_FADV_NORMAL" => Hint::Normal,
                "POSIX_FADV_SEQUENTIAL" => Hint::Sequential,
                "POSIX_FADV_RANDOM" => Hint::Random,
                "POSIX_FADV_WILLNEED" => Hint::WillNeed { start_page, pages },
                "POSIX_FADV_DONTNEED" => Hint::DontNeed { start_page, pages },
                _ => return Ok(()), // NOREUSE and unknown advice: no readahead effect
            };
            b.events.push(Event::Hint { handle, hint });
        }
        "lseek" => {
            need(3)?;
            let (fd, path) = parse_fd(call.args[0])?;
            if let Some(pos) = result_value(call.result) {
                if let Some(d) = fds.for_fd(b, fd, path) {
                    fds.description(d).pos = pos as u64;
                }
            }
        }
        "close" => {
            need(1)?;
            let (fd, _) = parse_fd(call.args[0])?;
            if result_value(call.result).is_some() {
                fds.close(b, fd);
            }
        }
        _ => {} // other syscalls, if the user traced more: not ours
    }
    Ok(())
}
