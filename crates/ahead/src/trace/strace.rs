//! The strace log reader: one call per line (joined where another thread split it), each
//! descriptor followed from its `openat` to its `close` (the module comment of `trace` says
//! what is read and what is skipped).

use super::*;

/// One descriptor in the traced program.
pub(super) struct OpenFd {
    pub(super) path: String,
    pub(super) file: Option<u32>,
    pub(super) handle: Option<u32>,
    pub(super) pos: u64,
}

/// A syscall line split into its parts.
pub(super) struct Call<'a> {
    pub(super) name: &'a str,
    pub(super) args: Vec<&'a str>,
    pub(super) result: &'a str,
}

/// Parse an strace log (see the module comment), whatever its first line looks like.
pub fn parse_strace(input: impl BufRead) -> Result<Trace, TraceError> {
    let mut b = Builder::default();
    let mut fds: HashMap<i64, OpenFd> = HashMap::new();
    let mut unfinished: HashMap<String, String> = HashMap::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| read_error(n, e))?;
        let text = line.trim_end();
        if text.is_empty() {
            continue;
        }
        // Optional thread id prefix (strace -f).
        let (tid, rest) = match text.split_once(' ') {
            Some((p, r)) if p.bytes().all(|c| c.is_ascii_digit()) => {
                (p.to_string(), r.trim_start())
            }
            _ => (String::new(), text),
        };
        if rest.starts_with("+++") || rest.starts_with("---") || rest.starts_with("strace:") {
            continue;
        }
        let joined;
        let rest = if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            unfinished.insert(tid, head.to_string());
            continue;
        } else if let Some(after) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = after.split_once(" resumed>") else {
                return Err(err_at(n, "malformed '<... resumed>' line"));
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
            return Err(err_at(
                n,
                format!("not an strace line: '{}'", shorten(rest)),
            ));
        };
        apply_call(&call, &mut b, &mut fds).map_err(|m| err_at(n, m))?;
    }
    Ok(b.finish())
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
                b')' => depth -= 1,
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

/// `3</a/b>` -> (3, Some("/a/b")); `3` -> (3, None).
pub(super) fn parse_fd(arg: &str) -> Result<(i64, Option<&str>), String> {
    let (num, path) = match arg.find('<') {
        Some(i) => {
            let end = arg
                .rfind('>')
                .filter(|&e| e > i)
                .ok_or_else(|| format!("bad descriptor '{arg}'"))?;
            (&arg[..i], Some(&arg[i + 1..end]))
        }
        None => (arg, None),
    };
    let fd = num
        .trim()
        .parse()
        .map_err(|_| format!("bad descriptor '{arg}'"))?;
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
    first.parse::<i64>().ok().filter(|&v| v >= 0)
}

pub(super) fn regular_path(path: &str) -> bool {
    path.starts_with('/')
        && !["/dev/", "/proc/", "/sys/"]
            .iter()
            .any(|p| path.starts_with(p))
}

pub(super) fn apply_call(
    call: &Call<'_>,
    b: &mut Builder,
    fds: &mut HashMap<i64, OpenFd>,
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
        "openat" | "open" => {
            let Some(fd) = result_value(call.result) else {
                return Ok(());
            };
            // With -y the result carries the path: `= 3</a/b>`.
            let path = match call.result.find('<') {
                Some(_) => parse_fd(call.result.split_whitespace().next().unwrap_or(""))?
                    .1
                    .map(str::to_string),
                None => {
                    need(if call.name == "openat" { 2 } else { 1 })?;
                    let raw = call.args[if call.name == "openat" { 1 } else { 0 }];
                    Some(raw.trim_matches('"').to_string())
                }
            };
            if let Some(path) = path.filter(|p| regular_path(p)) {
                if let Some(old) = fds.remove(&fd) {
                    close_fd(b, old);
                }
                fds.insert(
                    fd,
                    OpenFd {
                        path,
                        file: None,
                        handle: None,
                        pos: 0,
                    },
                );
            }
        }
        "read" | "pread64" | "preadv" => {
            need(if call.name == "read" { 3 } else { 4 })?;
            let (fd, path) = parse_fd(call.args[0])?;
            let Some(got) = result_value(call.result) else {
                return Ok(());
            };
            let got = got as u64;
            let Some((handle, file, pos)) = handle_for(fd, path, b, fds) else {
                return Ok(());
            };
            match call.name {
                "read" => {
                    let asked = parse_num(call.args[2], "read's count")?;
                    b.read(handle, file, pos, asked, got);
                    if let Some(e) = fds.get_mut(&fd) {
                        e.pos += got;
                    }
                }
                "pread64" => {
                    let asked = parse_num(call.args[2], "pread64's count")?;
                    let offset = parse_num(call.args[3], "pread64's offset")?;
                    b.read(handle, file, offset, asked, got);
                }
                _ => {
                    let offset = parse_num(call.args[call.args.len() - 1], "preadv's offset")?;
                    b.read(handle, file, offset, got, got);
                }
            }
        }
        "fadvise64" | "readahead" => {
            need(if call.name == "readahead" { 3 } else { 4 })?;
            if result_value(call.result).is_none() {
                return Ok(());
            }
            let (fd, path) = parse_fd(call.args[0])?;
            let Some((handle, _, _)) = handle_for(fd, path, b, fds) else {
                return Ok(());
            };
            let offset = parse_num(call.args[1], "the offset")?;
            let len = parse_num(call.args[2], "the length")?;
            let start_page = offset / crate::units::PAGE_SIZE;
            let pages = if len == 0 {
                u64::MAX / 2 // to the end of the file
            } else {
                (offset + len).div_ceil(crate::units::PAGE_SIZE) - start_page
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
            let (fd, _) = parse_fd(call.args[0])?;
            if let (Some(pos), Some(entry)) = (result_value(call.result), fds.get_mut(&fd)) {
                entry.pos = pos as u64;
            }
        }
        "close" => {
            need(1)?;
            let (fd, _) = parse_fd(call.args[0])?;
            if result_value(call.result).is_some() {
                if let Some(old) = fds.remove(&fd) {
                    close_fd(b, old);
                }
            }
        }
        _ => {} // other syscalls, if the user traced more: not ours
    }
    Ok(())
}

/// The trace handle for descriptor `fd` (opening one at first use), its file, and the
/// descriptor's position. `None` for descriptors that are not regular files.
pub(super) fn handle_for(
    fd: i64,
    path: Option<&str>,
    b: &mut Builder,
    fds: &mut HashMap<i64, OpenFd>,
) -> Option<(u32, u32, u64)> {
    let entry = match (fds.get(&fd), path) {
        (Some(e), Some(p)) if e.path != p => None,
        (Some(_), _) => fds.get_mut(&fd),
        (None, _) => None,
    };
    let entry = match entry {
        Some(e) => e,
        None => {
            // A descriptor opened before the trace began, or inherited: follow it by path.
            let p = path.filter(|p| regular_path(p))?;
            if let Some(old) = fds.remove(&fd) {
                close_fd(b, old);
            }
            fds.entry(fd).or_insert(OpenFd {
                path: p.to_string(),
                file: None,
                handle: None,
                pos: 0,
            })
        }
    };
    let file = *entry.file.get_or_insert_with(|| b.file(&entry.path));
    let handle = match entry.handle {
        Some(h) => h,
        None => {
            let h = b.open(file);
            entry.handle = Some(h);
            h
        }
    };
    Some((handle, file, entry.pos))
}

pub(super) fn close_fd(b: &mut Builder, fd: OpenFd) {
    if let Some(handle) = fd.handle {
        b.events.push(Event::Close { handle });
    }
}
