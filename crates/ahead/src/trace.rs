//! Application traces, turned into [`Workload`]s for the simulator.
//!
//! Two formats, told apart by their first line:
//!
//! * **strace logs**, as written by `strace -f -y -e trace=TRACED -o FILE CMD` (`ahead trace`
//!   writes exactly that, [`TRACED`]), or by plain `strace -o FILE CMD`, with or without `-T`,
//!   `-t`/`-tt`/`-ttt`/`-r`, `-x`/`-xx`. `-y` names each descriptor's path (`3</data/f>`);
//!   `-f` prefixes lines with the thread id. File positions are followed through `openat`,
//!   `read`, `readv`, `lseek`, `dup`/`dup2`/`dup3`/`fcntl(F_DUPFD)` (a descriptor `dup`ed to
//!   another, as `dd` does to its input, shares its file and position) and `close`;
//!   `pread64`/`preadv` carry their offset; `fadvise64` and `readahead` become hints. Relative
//!   paths are resolved against the working directory the log tells (`-y`, `chdir`, the
//!   `# cwd:` line `ahead trace` writes). Calls split by other threads (`<unfinished ...>` /
//!   `<... read resumed>`) are joined. Reads that are not a file's (pipes, sockets, `/dev`,
//!   `/proc`, `/sys`), failed reads, and reads of descriptors the log never names are skipped
//!   and counted in [`Trace::notes`]; so is a last line cut short. Descriptor tables are one per
//!   trace: a process that inherits a descriptor is followed, two processes with different
//!   files on one number are told apart by the path.
//! * **CSV** with a header naming at least `file,offset,len` (bytes) and optionally `thread`,
//!   `time_ns` and `size`; `#` lines are comments. `size` gives the file's size; without it a
//!   file is as long as the furthest byte read from it.
//!
//! Every read is checked where it is parsed: no read ends past [`MAX_MODELLED_BYTES`] (the
//! simulator's files), and a CSV read is no longer than one `read(2)` transfers
//! ([`MAX_READ_BYTES`]); an strace read's count is clipped to that, as the kernel clips it.
//!
//! Each opened file description (each `openat` in strace, each file in CSV) gets its own
//! readahead state; descriptions of the same path share its cached pages. A `replay` never
//! opens the files a trace names: it only simulates.

use std::collections::HashMap;
use std::io::{BufRead, Read};

use crate::policy::Hint;
use crate::units::{Bytes, MAX_MODELLED_BYTES, MAX_READ_BYTES};
use crate::workload::{Event, FileSpec, Workload};

mod strace;

pub use strace::parse_strace;

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
    /// What the parser skipped and why (reads that are not a file's, failed reads, a last
    /// line cut short), for the report.
    pub notes: Vec<String>,
    /// The program's own time, in nanoseconds, where the log holds it (`ahead trace --time`
    /// writes a `# program_ns: N` line: the program run again on its files, cached, without
    /// the tracer, whose own cost a call is tens of times a small read's).
    pub program_ns: Option<u64>,
}

impl Trace {
    /// The trace as a workload.
    pub fn into_workload(self) -> Workload {
        Workload::from_events(self.files, self.events)
    }

    /// The trace as a workload in which the program's own time ([`Trace::program_ns`]) is
    /// spent in equal shares before each of its reads ([`Event::Compute`]); the plain workload
    /// where the trace has no time. The shares are equal because strace's own cost between two
    /// calls buries what the program did between them.
    pub fn into_timed_workload(self) -> Workload {
        let reads = self.reads() as u64;
        let Some(total) = self.program_ns.filter(|_| reads > 0) else {
            return self.into_workload();
        };
        let mut events = Vec::with_capacity(self.events.len() + reads as usize);
        let mut spent = 0u64;
        let mut seen = 0u64;
        for e in self.events {
            if let Event::Read { .. } = e {
                seen += 1;
                // Cumulative rounding: the shares add up to the total exactly (in u128: a long
                // run's nanoseconds times its reads overflows u64).
                let due = (u128::from(total) * u128::from(seen) / u128::from(reads)) as u64;
                events.push(Event::Compute { ns: due - spent });
                spent = due;
            }
            events.push(e);
        }
        Workload::from_events(self.files, events)
    }

    /// The simulator's settings `config` for [`Trace::into_timed_workload`]: where the trace
    /// holds the program's own time, that time already holds its reads of the kernel's cache,
    /// so the reader is charged nothing more a page.
    pub fn timed_config(&self, mut config: crate::sim::SimConfig) -> crate::sim::SimConfig {
        if self.program_ns.is_some() {
            config.compute_ns_per_page = 0;
        }
        config
    }

    /// Number of read events.
    pub fn reads(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Read { .. }))
            .count()
    }
}

/// The calls `ahead trace` records: what opens, reads, moves, duplicates and closes a
/// descriptor, changes the working directory, or advises the kernel.
pub const TRACED: &str = "open,openat,openat2,creat,read,readv,pread64,preadv,preadv2,lseek,dup,dup2,dup3,fcntl,close,chdir,fchdir,fadvise64,readahead";

/// Run `command` under strace, writing the log this module reads to `log` (what `ahead trace`
/// does). Returns the command's exit status.
pub fn run_strace(
    log: &std::path::Path,
    command: &[String],
) -> Result<std::process::ExitStatus, String> {
    std::process::Command::new("strace")
        .args(["-f", "-y", "-e", &format!("trace={TRACED}"), "-o"])
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
    if !looks_csv && headerless_csv(&first) {
        return Err(err_at(
            head.len(),
            format!(
                "'{}' looks like a CSV row, but a CSV trace starts with a header naming its columns: at least file,offset,len (bytes)",
                strace::shorten(&first)
            ),
        ));
    }
    let trace = if looks_csv {
        parse_csv(chained)?
    } else {
        parse_strace(chained)?
    };
    if trace.reads() == 0 {
        let mut message =
            "the trace names no reads of regular files: nothing to replay".to_string();
        for note in &trace.notes {
            message += &format!(" ({note})");
        }
        return Err(err(message));
    }
    Ok(trace)
}

/// Whether `line` looks like a row of a CSV trace (a name, then numbers) rather than a header
/// or an strace line.
fn headerless_csv(line: &str) -> bool {
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    fields.len() >= 3
        && !fields[0].contains('(')
        && fields[1..3]
            .iter()
            .all(|f| !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()))
}

/// A read of `len` bytes at `offset` fits what the simulator models.
fn check_extent(offset: u64, len: u64) -> Result<(), String> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_MODELLED_BYTES => Ok(()),
        _ => Err(format!(
            "a read of {len} bytes at offset {offset} ends past what the simulator models ({} GiB)",
            MAX_MODELLED_BYTES >> 30
        )),
    }
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
    notes: Vec<String>,
    program_ns: Option<u64>,
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
            notes: self.notes,
            program_ns: self.program_ns,
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
        if len > MAX_READ_BYTES {
            return Err(err_at(
                line,
                format!("len {len} is more than one read(2) transfers ({MAX_READ_BYTES} bytes)"),
            ));
        }
        check_extent(offset, len).map_err(|m| err_at(line, m))?;
        let file = b.file(path);
        if let Some(c) = c_size {
            if record.get(c).is_some_and(|t| !t.is_empty()) {
                let size = field(c, "size")?;
                if size > MAX_MODELLED_BYTES {
                    return Err(err_at(
                        line,
                        format!(
                            "size {size} is more than the simulator models ({} GiB)",
                            MAX_MODELLED_BYTES >> 30
                        ),
                    ));
                }
                b.explicit_size[file as usize] = Some(size);
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

    /// What `strace -o l cat ../f` writes (no -f, no -y): the relative path is kept, and
    /// resolved where the log gives the working directory.
    #[test]
    fn strace_relative_paths_are_kept_and_resolved_against_the_cwd() {
        let log = r#"openat(AT_FDCWD, "/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY|O_CLOEXEC) = 3
read(3, "\177ELF\2\1\1\3"..., 832) = 832
close(3)                                = 0
openat(AT_FDCWD, "../f", O_RDONLY)      = 3
read(3, "abc"..., 131072) = 131072
read(3, "def"..., 131072) = 5000
read(3, "", 131072)                     = 0
close(3)                                = 0
+++ exited with 0 +++
"#;
        let t = parse(log.as_bytes()).unwrap();
        assert_eq!(t.files[1].name, "../f");
        assert_eq!(t.reads(), 4);
        let with_cwd = format!("# cwd: /tmp/st/sub\n{log}");
        let t = parse(with_cwd.as_bytes()).unwrap();
        assert_eq!(t.files[1].name, "/tmp/st/f");
        assert_eq!(t.files[1].size, Bytes(136072));
        let chdir = format!("chdir(\"/data/x\") = 0\n{log}");
        let t = parse(chdir.as_bytes()).unwrap();
        assert_eq!(t.files[1].name, "/data/f");
    }

    /// `-T` (a duration after the result), `-tt` (a time before the call), `-xx` (every
    /// string in hex, -y paths too): the same reads as the plain log.
    #[test]
    fn strace_durations_times_and_hex_strings_are_read() {
        let log = r#"14938 10:23:45.123456 openat(AT_FDCWD, "\x2f\x64\x2f\x66", O_RDONLY) = 3 <0.000012>
14938 10:23:45.123500 read(3, "\x61\x62"..., 4096) = 4096 <0.000010>
14938 10:23:45.123600 read(3<\x2f\x64\x2f\x66>, "\x61"..., 4096) = 100 <0.000010>
14938 10:23:45.123700 close(3) = 0 <0.000009>
"#;
        let t = parse(log.as_bytes()).unwrap();
        assert_eq!(t.files.len(), 1);
        assert_eq!(t.files[0].name, "/d/f");
        assert_eq!(reads(&t), [(0, 0, 4096), (0, 4096, 4096)]);
        assert!(t.notes.is_empty(), "{:?}", t.notes);
        let relative = "1.000001 openat(AT_FDCWD, \"/d/f\", O_RDONLY) = 3 <0.000012>\n[pid 7] read(3, \"\"..., 10) = 10\n";
        assert_eq!(parse(relative.as_bytes()).unwrap().reads(), 1);
    }

    /// `dd if=f`: the file opened on 3, dup2'd onto 0, 3 closed, then read through 0; and a
    /// dup's reads share the position of the description.
    #[test]
    fn strace_reads_through_a_duplicated_descriptor_are_kept() {
        let log = r#"openat(AT_FDCWD, "/d/f", O_RDONLY) = 3
dup2(3, 0)                              = 0
close(3)                                = 0
read(0, "a"..., 65536)                  = 65536
read(0, "b"..., 65536)                  = 65536
fcntl(0, F_DUPFD_CLOEXEC, 10)           = 10
read(10, "c"..., 4096)                  = 4096
read(0, "d"..., 4096)                   = 4096
close(0)                                = 0
read(10, "e"..., 4096)                  = 0
close(10)                               = 0
"#;
        let t = parse(log.as_bytes()).unwrap();
        assert_eq!(
            reads(&t),
            [
                (0, 0, 65536),
                (0, 65536, 65536),
                (0, 131072, 4096),
                (0, 135168, 4096),
                (0, 139264, 4096)
            ]
        );
        // One description, closed once, with its last descriptor.
        let closes = t
            .events
            .iter()
            .filter(|e| matches!(e, Event::Close { .. }))
            .count();
        assert_eq!(closes, 1);
        assert!(matches!(t.events.last(), Some(Event::Close { handle: 0 })));
    }

    /// Reads that are not a file's are skipped and counted, and the report says so.
    #[test]
    fn strace_skipped_reads_are_counted_in_the_notes() {
        let log = r#"read(0</dev/pts/0>, "x", 1) = 1
read(5<pipe:[123]>, "x", 1) = 1
read(7, "x", 1) = 1
openat(AT_FDCWD, "/d/f", O_RDONLY) = 3
read(3, 0x7ffd, 4096) = -1 EIO (Input/output error)
read(3, "a"..., 4096) = 4096
"#;
        let t = parse(log.as_bytes()).unwrap();
        assert_eq!(t.reads(), 1);
        let notes = t.notes.join("\n");
        assert!(notes.contains("1 failed reads"), "{notes}");
        assert!(notes.contains("2 reads of pipes"), "{notes}");
        assert!(
            notes.contains("1 reads of descriptors opened before"),
            "{notes}"
        );
    }

    /// A log cut short mid-line (the program was still running): its last line is skipped
    /// with a note; the same line anywhere else is an error naming it.
    #[test]
    fn strace_a_truncated_last_line_is_skipped_with_a_note() {
        let log = "openat(AT_FDCWD, \"/d/f\", O_RDONLY) = 3\nread(3, \"a\"..., 4096) = 4096\nread(3, \"b\"..";
        let t = parse(log.as_bytes()).unwrap();
        assert_eq!(t.reads(), 1);
        assert!(
            t.notes
                .iter()
                .any(|n| n.contains("line 3") && n.contains("cut short")),
            "{:?}",
            t.notes
        );
        let inner = format!("{log}\nread(3, \"c\"..., 4096) = 4096\n");
        assert_eq!(parse(inner.as_bytes()).unwrap_err().line, Some(3));
    }

    /// A CSV trace without its header is told so, not called an strace line.
    #[test]
    fn a_csv_without_its_header_is_told_so() {
        let e = parse("/data/f,0,4096\n/data/f,4096,4096\n".as_bytes()).unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("header"), "{e}");
    }

    /// Offsets and lengths no file the simulator models could hold are refused on their line,
    /// in either format, not simulated (they aborted or hung it).
    #[test]
    fn reads_past_what_the_simulator_models_are_refused_on_their_line() {
        for row in [
            "/a,9223372036854775807,1",
            "/a,4611686018427387904,4611686018427387904",
            "/a,9223372036854771712,4096",
            "/a,0,9223372036854775807",
            "/a,0,4096,9223372036854775807",
        ] {
            let csv = format!("file,offset,len,size\n/a,0,4096,\n{row}\n");
            let e = parse(csv.as_bytes()).unwrap_err();
            assert_eq!(e.line, Some(3), "{row}: {e}");
        }
        let log = "openat(AT_FDCWD, \"/a\", O_RDONLY) = 3\npread64(3, \"\"..., 4096, 9223372036854771712) = 0\n";
        assert_eq!(parse(log.as_bytes()).unwrap_err().line, Some(2));
        // An strace read's count is what was asked, clipped as the kernel clips it.
        let log =
            "openat(AT_FDCWD, \"/a\", O_RDONLY) = 3\nread(3, \"\"..., 9223372036854775807) = 10\n";
        assert_eq!(
            reads(&parse(log.as_bytes()).unwrap()),
            [(0, 0, MAX_READ_BYTES)]
        );
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
        let e = parse(
            "openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\nread(3</a>, garbage\nclose(3</a>) = 0\n"
                .as_bytes(),
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        // The same line last is a line cut short: skipped, and the error says so.
        let e =
            parse("openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\nread(3</a>, garbage\n".as_bytes())
                .unwrap_err();
        assert!(
            e.message.contains("no reads") && e.message.contains("line 2"),
            "{e}"
        );
        let e = parse("".as_bytes()).unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let e = parse("openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\nclose(3</a>) = 0\n".as_bytes())
            .unwrap_err();
        assert!(e.message.contains("no reads"), "{e}");
    }
}
