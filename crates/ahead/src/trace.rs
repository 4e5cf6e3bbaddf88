//! Application traces, turned into [`Workload`]s for the simulator.
//!
//! Two formats, told apart by their first line:
//!
//! * **strace logs**, as written by
//!   `strace -f -y -e trace=openat,read,pread64,preadv,lseek,close,fadvise64,readahead -o FILE CMD`
//!   (`ahead trace` writes exactly that). `-y` names each descriptor's path (`3</data/f>`);
//!   `-f` prefixes lines with the thread id. File positions are followed through `openat`,
//!   `read`, `lseek` and `close`; `pread64`/`preadv` carry their offset; `fadvise64` and
//!   `readahead` become hints. Calls split by other
//!   threads (`<unfinished ...>` / `<... read resumed>`) are joined. Descriptors that are not
//!   regular files (pipes, sockets, `/dev`, `/proc`, `/sys`) and failed calls are skipped.
//!   Descriptor tables are one per trace: a process that inherits a descriptor is followed, two
//!   processes with different files on one number are told apart by the path.
//! * **CSV** with a header naming at least `file,offset,len` (bytes) and optionally `thread`,
//!   `time_ns` and `size`; `#` lines are comments. `size` gives the file's size; without it a
//!   file is as long as the furthest byte read from it.
//!
//! Each opened file description (each `openat` in strace, each file in CSV) gets its own
//! readahead state; descriptions of the same path share its cached pages. A `replay` never
//! opens the files a trace names: it only simulates.

use std::collections::HashMap;
use std::io::{BufRead, Read};

use crate::policy::Hint;
use crate::units::Bytes;
use crate::workload::{Event, FileSpec, Workload};

/// A trace that could not be read: what is wrong, and on which line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number, when the problem is on one line.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(n) => write!(f, "line {n}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for TraceError {}

fn err_at(line: usize, message: impl Into<String>) -> TraceError {
    TraceError {
        line: Some(line),
        message: message.into(),
    }
}

/// A line that could not be read: binary data gets a word on what a trace is.
fn read_error(line: usize, e: std::io::Error) -> TraceError {
    if e.kind() == std::io::ErrorKind::InvalidData {
        err_at(
            line,
            "not text: ahead replay reads strace logs (as `ahead trace` writes) and CSV traces",
        )
    } else {
        err_at(line, format!("cannot read: {e}"))
    }
}

fn err(message: impl Into<String>) -> TraceError {
    TraceError {
        line: None,
        message: message.into(),
    }
}

/// A parsed trace: files (with sizes) and events, held in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Files read, in order of first read.
    pub files: Vec<FileSpec>,
    /// Opens, reads and closes.
    pub events: Vec<Event>,
}

impl Trace {
    /// The trace as a workload.
    pub fn into_workload(self) -> Workload {
        Workload::from_events(self.files, self.events)
    }

    /// Number of read events.
    pub fn reads(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Read { .. }))
            .count()
    }
}

/// Run `command` under strace, writing the log this module reads to `log` (what `ahead trace`
/// does). Returns the command's exit status.
pub fn run_strace(
    log: &std::path::Path,
    command: &[String],
) -> Result<std::process::ExitStatus, String> {
    std::process::Command::new("strace")
        .args([
            "-f",
            "-y",
            "-e",
            "trace=openat,read,pread64,preadv,lseek,close,fadvise64,readahead",
            "-o",
        ])
        .arg(log)
        .arg("--")
        .args(command)
        .status()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "strace is not installed: install it (apt-get install strace) and try again"
                    .to_string()
            }
            _ => format!("cannot run strace: {e}"),
        })
}

/// Read a trace file in either format.
pub fn read_path(path: &std::path::Path) -> Result<Trace, TraceError> {
    // Look before opening: opening a FIFO for reading would wait for a writer.
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(err(format!(
                "{} is a directory: give the trace file (strace log or CSV) in it",
                path.display()
            )))
        }
        Ok(m) if !m.is_file() => {
            return Err(err(format!(
                "{} is not a regular file: save the trace to a file and give that",
                path.display()
            )))
        }
        _ => {}
    }
    let file = std::fs::File::open(path)
        .map_err(|e| err(format!("cannot open trace {}: {e}", path.display())))?;
    parse(std::io::BufReader::with_capacity(1 << 20, file))
}

/// Parse a trace in either format from a reader.
pub fn parse(mut input: impl BufRead) -> Result<Trace, TraceError> {
    // Peek at the first meaningful line to pick the format.
    let mut head = Vec::new();
    let mut first = String::new();
    loop {
        let mut line = String::new();
        let n = input
            .read_line(&mut line)
            .map_err(|e| read_error(head.len() + 1, e))?;
        if n == 0 {
            break;
        }
        head.push(line.clone());
        let t = line.trim();
        if !t.is_empty() && !t.starts_with('#') {
            first = t.to_string();
            break;
        }
    }
    if first.is_empty() {
        return Err(err("the trace is empty: no reads to replay"));
    }
    let chained = std::io::Cursor::new(head.concat()).chain(input);
    let looks_csv =
        first.split(',').map(|c| c.trim()).any(|c| c == "offset") && first.contains("file");
    let trace = if looks_csv {
        parse_csv(chained)?
    } else {
        parse_strace(chained)?
    };
    if trace.reads() == 0 {
        return Err(err(
            "the trace names no reads of regular files: nothing to replay",
        ));
    }
    Ok(trace)
}

/// Files and handles being built from a trace.
#[derive(Default)]
struct Builder {
    files: Vec<FileSpec>,
    by_path: HashMap<String, u32>,
    furthest: Vec<u64>,
    explicit_size: Vec<Option<u64>>,
    events: Vec<Event>,
    next_handle: u32,
}

impl Builder {
    fn file(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.by_path.get(path) {
            return id;
        }
        let id = self.files.len() as u32;
        self.files.push(FileSpec {
            name: path.to_string(),
            size: Bytes(0),
        });
        self.by_path.insert(path.to_string(), id);
        self.furthest.push(0);
        self.explicit_size.push(None);
        id
    }

    fn open(&mut self, file: u32) -> u32 {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.events.push(Event::Open { handle, file });
        handle
    }

    fn read(&mut self, handle: u32, file: u32, offset: u64, len: u64, got: u64) {
        if got > 0 {
            let f = &mut self.furthest[file as usize];
            *f = (*f).max(offset.saturating_add(got));
        }
        if len > 0 {
            self.events.push(Event::Read {
                handle,
                offset: Bytes(offset),
                len: Bytes(len),
            });
        }
    }

    fn finish(mut self) -> Trace {
        for (i, f) in self.files.iter_mut().enumerate() {
            f.size = Bytes(self.explicit_size[i].unwrap_or(self.furthest[i]));
        }
        Trace {
            files: self.files,
            events: self.events,
        }
    }
}

// ---------------------------------------------------------------- CSV

/// Parse a CSV trace (see the module comment), whatever its first line looks like.
pub fn parse_csv(input: impl std::io::Read) -> Result<Trace, TraceError> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(input);
    let headers = reader
        .headers()
        .map_err(|e| err(format!("cannot read the CSV header: {e}")))?
        .clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(c_file), Some(c_offset), Some(c_len)) = (col("file"), col("offset"), col("len"))
    else {
        return Err(err_at(
            1,
            "the CSV header must name file, offset and len (bytes)",
        ));
    };
    let c_size = col("size");
    let mut b = Builder::default();
    let mut handles: HashMap<u32, u32> = HashMap::new();
    let mut record = csv::StringRecord::new();
    loop {
        let more = reader.read_record(&mut record).map_err(|e| {
            let line = e.position().map(|p| p.line() as usize);
            TraceError {
                line,
                message: format!("bad CSV row: {e}"),
            }
        })?;
        if !more {
            break;
        }
        let line = record.position().map(|p| p.line() as usize).unwrap_or(0);
        let field = |i: usize, name: &str| -> Result<u64, TraceError> {
            let text = record
                .get(i)
                .ok_or_else(|| err_at(line, format!("missing {name}")))?;
            text.parse::<u64>().map_err(|_| {
                err_at(
                    line,
                    format!("{name} must be a whole number of bytes, not '{text}'"),
                )
            })
        };
        let path = record.get(c_file).unwrap_or("");
        if path.is_empty() {
            return Err(err_at(line, "empty file name"));
        }
        let offset = field(c_offset, "offset")?;
        let len = field(c_len, "len")?;
        let file = b.file(path);
        if let Some(c) = c_size {
            if record.get(c).is_some_and(|t| !t.is_empty()) {
                b.explicit_size[file as usize] = Some(field(c, "size")?);
            }
        }
        let handle = match handles.get(&file) {
            Some(&h) => h,
            None => {
                let h = b.open(file);
                handles.insert(file, h);
                h
            }
        };
        b.read(handle, file, offset, len, len);
    }
    Ok(b.finish())
}

// ---------------------------------------------------------------- strace

/// One descriptor in the traced program.
struct OpenFd {
    path: String,
    file: Option<u32>,
    handle: Option<u32>,
    pos: u64,
}

/// A syscall line split into its parts.
struct Call<'a> {
    name: &'a str,
    args: Vec<&'a str>,
    result: &'a str,
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

fn shorten(s: &str) -> String {
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
fn split_call(s: &str) -> Option<Call<'_>> {
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
fn parse_fd(arg: &str) -> Result<(i64, Option<&str>), String> {
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

fn parse_num(arg: &str, what: &str) -> Result<u64, String> {
    arg.trim()
        .parse()
        .map_err(|_| format!("{what} should be a number, not '{}'", shorten(arg)))
}

/// The call's return value, or `None` if it failed (`-1 ENOENT ...`) or is unknown (`?`).
fn result_value(result: &str) -> Option<i64> {
    let first = result.split_whitespace().next()?;
    first.parse::<i64>().ok().filter(|&v| v >= 0)
}

fn regular_path(path: &str) -> bool {
    path.starts_with('/')
        && !["/dev/", "/proc/", "/sys/"]
            .iter()
            .any(|p| path.starts_with(p))
}

fn apply_call(
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
fn handle_for(
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

fn close_fd(b: &mut Builder, fd: OpenFd) {
    if let Some(handle) = fd.handle {
        b.events.push(Event::Close { handle });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(t: &Trace) -> Vec<(u32, u64, u64)> {
        t.events
            .iter()
            .filter_map(|e| match *e {
                Event::Read {
                    handle,
                    offset,
                    len,
                } => Some((handle, offset.0, len.0)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn strace_fadvise_and_readahead_become_hints() {
        let log = "\
10 openat(AT_FDCWD</tmp>, \"/d/f\", O_RDONLY) = 3</d/f>
10 fadvise64(3</d/f>, 0, 0, POSIX_FADV_SEQUENTIAL) = 0
10 readahead(3</d/f>, 8192, 8192) = 0
10 fadvise64(3</d/f>, 0, 0, POSIX_FADV_NOREUSE) = 0
10 read(3</d/f>, \"ab\"..., 4096) = 4096
";
        let t = parse(log.as_bytes()).unwrap();
        let hints: Vec<Hint> = t
            .events
            .iter()
            .filter_map(|e| match *e {
                Event::Hint { hint, .. } => Some(hint),
                _ => None,
            })
            .collect();
        assert_eq!(
            hints,
            [
                Hint::Sequential,
                Hint::WillNeed {
                    start_page: 2,
                    pages: 2
                }
            ]
        );
        assert_eq!(reads(&t), [(0, 0, 4096)]);
    }

    #[test]
    fn strace_positions_follow_read_lseek_and_reopen() {
        let log = r#"100 openat(AT_FDCWD, "/data/a", O_RDONLY) = 3</data/a>
100 read(3</data/a>, "abc, ) = 5\""..., 4096) = 4096
100 read(3</data/a>,  <unfinished ...>
101 read(0</dev/pts/0>, "x", 1) = 1
100 <... read resumed>""..., 4096) = 100
100 lseek(3</data/a>, 0, SEEK_SET) = 0
100 pread64(3</data/a>, ""..., 512, 8192) = 0
100 close(3</data/a>) = 0
100 openat(AT_FDCWD, "/data/a", O_RDONLY) = 3</data/a>
100 read(3</data/a>, ""..., 4096) = 4096
100 +++ exited with 0 +++
"#;
        let t = parse(log.as_bytes()).unwrap();
        assert_eq!(
            t.files,
            [FileSpec {
                name: "/data/a".into(),
                size: Bytes(4196)
            }]
        );
        assert_eq!(
            reads(&t),
            [(0, 0, 4096), (0, 4096, 4096), (0, 8192, 512), (1, 0, 4096)]
        );
        assert!(t.events.contains(&Event::Close { handle: 0 }));
    }

    #[test]
    fn csv_with_comments_and_sizes() {
        let csv = "# a comment\nfile,offset,len,size\n/a,0,4096,100000\n/b,4096,10,\n/a,4096,4096,100000\n";
        let t = parse(csv.as_bytes()).unwrap();
        assert_eq!(t.files[0].size, Bytes(100000));
        assert_eq!(t.files[1].size, Bytes(4106));
        assert_eq!(reads(&t), [(0, 0, 4096), (1, 4096, 10), (0, 4096, 4096)]);
    }

    #[test]
    fn bad_lines_are_named() {
        let e = parse("file,offset,len\n/a,0,4096\n/a,zero,4096\n".as_bytes()).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        let e =
            parse("openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\nread(3</a>, garbage\n".as_bytes())
                .unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = parse("".as_bytes()).unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let e = parse("openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\nclose(3</a>) = 0\n".as_bytes())
            .unwrap_err();
        assert!(e.message.contains("no reads"), "{e}");
    }
}
