"""The simulator from Python returns the CLI's own records: `ahead.sim(...)` equals
`ahead sim --json` with the same settings, and `ahead.replay` `ahead replay --json`."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import ahead
from conftest import ROOT


def cli():
    for p in (os.environ.get("AHEAD_CLI"), ROOT / "target/debug/ahead", ROOT / "target/release/ahead"):
        if p and Path(p).is_file():
            return str(p)
    if os.environ.get("AHEAD_REQUIRE_SERVERS") == "1":
        pytest.fail("the ahead CLI is not built (cargo build -p ahead-cli)")
    pytest.skip("the ahead CLI is not built (cargo build -p ahead-cli)")


def run_cli(*args):
    return json.loads(subprocess.run([cli(), *args, "--json"], check=True, capture_output=True, text=True).stdout)


@pytest.mark.parametrize("pattern,kwargs,flags", [
    ("seq:size=16m,bs=4k", {}, []),
    ("random:size=8m,bs=4k,count=500", {"device": "hdd", "cache": "4m"}, ["--device", "hdd", "--cache", "4m"]),
    ("iozone:mix", {"policy": "adaptive,linux-ondemand", "ra_max": "8m", "io_max": "4m", "compute_us": 10,
                    "eviction": "clock"},
     ["--policy", "adaptive,linux-ondemand", "--ra-max", "8m", "--io-max", "4m", "--compute-us", "10",
      "--eviction", "clock"]),
])
def test_sim_equals_the_clis_json(pattern, kwargs, flags):
    ours = ahead.sim(pattern, **kwargs)
    theirs = run_cli("sim", "--pattern", pattern, *flags)
    assert ours == theirs
    assert {r["policy"] for r in ours["results"]} >= {"oracle"}


def test_replay_equals_the_clis_json(tmp_path):
    trace = tmp_path / "reads.csv"
    lines = ["file,offset,len"] + [f"a.bin,{i * 4096},4096" for i in range(2000)] + \
            [f"b.bin,{(i * 7919 % 500) * 4096},4096" for i in range(500)]
    trace.write_text("\n".join(lines) + "\n")
    ours = ahead.replay(trace, policy="adaptive,none", device="remote")
    theirs = run_cli("replay", str(trace), "--policy", "adaptive,none", "--device", "remote")
    assert ours == theirs


def test_bad_settings_are_value_errors():
    for kwargs in [{"pattern": "zigzag"}, {"pattern": "seq", "policy": "psychic"}, {"pattern": "seq", "device": "tape"},
                   {"pattern": "seq", "cache": "lots"}, {"pattern": "seq", "compute_us": -1},
                   {"pattern": "seq", "eviction": "random"}]:
        with pytest.raises(ValueError):
            ahead.sim(**kwargs)
    with pytest.raises(OSError):
        ahead.replay("/no/such/trace.csv")


def test_named_readers_are_the_benches_reads():
    """The readers every bench reads by name (ahead::readers), from Python: the same reads."""
    names = [name for name, _ in ahead.readers()]
    assert {"seq-4k", "seq-64k", "random-4k", "skip-forward"} <= set(names)
    reads = list(ahead.reader_reads("seq-64k", 1 << 20))
    assert reads == [(i * 65536, 65536) for i in range(16)]
    skips = list(ahead.reader_reads("skip-forward", 128 << 20))
    assert skips[0] == (0, 1 << 20) and (48 << 20, 1 << 20) not in skips and (64 << 20, 1 << 20) in skips
    with pytest.raises(ValueError, match="seq-4k"):
        ahead.reader_reads("seq-3k", 1 << 20)


def test_a_calibrated_profile_is_a_device(tmp_path):
    # A profile as `ahead calibrate` writes it (the model's fields; the rest is for people): a
    # store that answers in 40 ms and streams 25 MB/s a connection. Python's simulator and the
    # CLI's give the same records on it, and a capped connection makes the same reads slower.
    profile = tmp_path / "store.json"
    model = {"name": "a capped store", "latency_us": 40000.0, "per_request_us": 0.0, "seek_us": 0.0,
             "bandwidth_mb_s": 500.0, "queue_depth": 64, "connection_mb_s": 25.0,
             "host": {"read_ns": 200.0, "copy_ns_per_page": 300.0}, "calibrated": {"probes": []}}
    profile.write_text(json.dumps(model))
    ours = ahead.sim("seq:size=64m,bs=1m", policy="adaptive", device=str(profile))
    assert ours == run_cli("sim", "--pattern", "seq:size=64m,bs=1m", "--policy", "adaptive", "--device", str(profile))
    uncapped = tmp_path / "uncapped.json"
    uncapped.write_text(json.dumps({**model, "name": "uncapped", "connection_mb_s": 0.0}))
    time = lambda r: next(x for x in r["results"] if x["policy"] == "adaptive")["modeled_ms"]
    assert time(ours) > time(ahead.sim("seq:size=64m,bs=1m", policy="adaptive", device=str(uncapped)))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**model, "queue_depth": 0}))
    with pytest.raises(ValueError, match="queue_depth"):
        ahead.sim("seq", device=str(bad))
