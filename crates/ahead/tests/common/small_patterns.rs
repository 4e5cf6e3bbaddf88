//! Small patterns of every kind (a few hundred pages), from a kind and four numbers, shared by
//! `tests/properties.rs` (which draws the numbers with proptest) and `examples/oracle_bound.rs`
//! (which draws them with its own generator, to count how often a policy beats the oracle).

/// Pattern kinds [`small_pattern`] knows, numbered `0..KINDS`.
pub const KINDS: usize = 8;

/// The pattern of `kind` (`0..KINDS`) over `size` pages read `bs` pages at a time (at most
/// `size`); `k` (1-5) sets the stride, streams, group or files, `seed` the random ones.
pub fn small_pattern(kind: usize, size: u64, bs: u64, k: u64, seed: u64) -> String {
    let bs = bs.min(size);
    match kind {
        0 => format!("seq:size={size}p,bs={bs}p"),
        1 => format!("reverse:size={size}p,bs={bs}p"),
        2 => format!("stride:size={size}p,bs={bs}p,stride={}p", bs * (k + 1)),
        3 => format!(
            "random:size={size}p,bs={bs}p,count={},seed={seed}",
            size / bs + 3
        ),
        4 => format!("interleaved:size={size}p,bs={bs}p,streams={k}"),
        5 => format!("shuffled:size={size}p,bs={bs}p,group={},seed={seed}", k * 4),
        6 => format!("paper:read={bs},seek={k},repeat={}", size / bs + 1),
        _ => format!("manyfiles:files={k},size={size}p,bs={bs}p"),
    }
}
