from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from conftest import requires_cuda
from torchpace.measure import env, memory, noise
from torchpace.measure.paired import Variant, compare
from torchpace.measure.stats import summarize
from torchpace.measure.timing import Work, measure_steps

# Measures time or load: `make test` runs it alone, never beside another test (pytest -m serial).
pytestmark = pytest.mark.serial

CPU = torch.device("cpu")


def _sleeper(seconds: float):  # type: ignore[no-untyped-def]
    def step() -> Work:
        time.sleep(seconds)
        return Work(samples=8, tokens=80)

    return step


def _matmul_work(repeats: int):  # type: ignore[no-untyped-def]
    a = torch.randn(384, 384)

    def step() -> Work:
        for _ in range(repeats):
            torch.mm(a, a)
        return Work(samples=1)

    return step


def test_summary_quartiles() -> None:
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.median, s.q1, s.q3, s.min, s.max) == (5, 3.0, 2.0, 4.0, 1.0, 5.0)
    assert s.rel_iqr == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        summarize([])


def test_planted_delay_is_measured_within_10_percent() -> None:
    planted = 0.030
    timing = measure_steps(_sleeper(planted), steps=15, warmup=2, device=CPU)
    assert timing.step.median == pytest.approx(planted, rel=0.10)
    assert len(timing.warmup_seconds) == 2
    assert timing.samples_per_s.median == pytest.approx(8 / planted, rel=0.10)
    assert timing.tokens_per_s is not None


def test_warmup_is_reported_apart_from_the_steady_state() -> None:
    calls = {"n": 0}

    def step() -> Work:
        calls["n"] += 1
        time.sleep(0.15 if calls["n"] == 1 else 0.01)  # a "compile" on the first call
        return Work(samples=1)

    timing = measure_steps(step, steps=8, warmup=1, device=CPU)
    assert timing.warmup_seconds[0] > 0.12
    assert timing.step.max < 0.05


def test_planted_2x_slowdown_reads_about_2x_with_sleep() -> None:
    res = compare(
        [Variant("slow", _sleeper(0.020)), Variant("fast", _sleeper(0.010))],
        rounds=8,
        block=3,
        warmup=1,
        device=CPU,
    )
    assert res.speedup["fast"].median == pytest.approx(2.0, rel=0.10)
    assert res.baseline == "slow"
    names = [v.name for v in res.variants]
    assert names == ["slow", "fast"]


def test_planted_2x_slowdown_reads_about_2x_with_compute() -> None:
    res = compare(
        [Variant("twice", _matmul_work(2 * 6)), Variant("once", _matmul_work(6))],
        rounds=10,
        block=3,
        warmup=2,
        device=CPU,
    )
    if res.noisy:  # another process shared the 2 cores: the ratio then measures the machine
        pytest.skip(f"the machine was busy: {'; '.join(res.noisy)}")
    assert res.speedup["once"].median == pytest.approx(2.0, rel=0.15)


def test_rounds_alternate_order_and_feed_equal_work() -> None:
    log: list[str] = []

    def make(name: str):  # type: ignore[no-untyped-def]
        def step() -> Work:
            log.append(name)
            return Work(samples=1)

        return step

    compare(
        [Variant("a", make("a")), Variant("b", make("b"))], rounds=4, block=2, warmup=1, device=CPU
    )
    measured = log[2:]  # after one warm-up step each
    assert measured == list("aabbbbaaaabbbbaa")


def test_jittery_variant_is_reported_noisy() -> None:
    rng = random.Random(0)

    def jitter() -> Work:
        time.sleep(rng.choice([0.002, 0.030]))
        return Work(samples=1)

    res = compare(
        [Variant("steady", _sleeper(0.010)), Variant("jitter", jitter)],
        rounds=12,
        block=1,
        warmup=0,
        device=CPU,
    )
    assert res.noisy and "spread" in res.noisy[0]


def test_compare_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least two"):
        compare([Variant("a", _sleeper(0))], rounds=2, block=1, warmup=0, device=CPU)
    with pytest.raises(ValueError, match="unique"):
        compare([Variant("a", _sleeper(0))] * 2, rounds=2, block=1, warmup=0, device=CPU)


def test_verdict_thresholds() -> None:
    assert noise.verdict(0.05, 0.0) == []
    assert "spread" in noise.verdict(noise.MAX_RATIO_REL_IQR + 0.01, None)[0]
    assert "other processes" in noise.verdict(0.0, noise.MAX_FOREIGN_CORES + 0.1)[0]


def _quiet_load() -> float:
    """The foreign load over a quiet 0.8 s of ours."""
    probe = noise.LoadProbe()
    time.sleep(0.8)
    load = probe.foreign_cores()
    assert load is not None
    return load


def _own_work_is_not_foreign(work: Callable[[], None]) -> None:
    """``work`` (ours) reads as no foreign load: what the probe sees while it runs stays within
    0.4 cores of the foreign load just before and just after. Another process that starts or
    stops in between (a shared runner, a second job) moves that window, so up to three tries
    are made; a probe that counted our own work as foreign would read about one core more in
    every one of them. Skipped when other processes never leave room to tell."""
    seen: list[str] = []
    for _ in range(3):
        before = _quiet_load()
        if before > 0.5:
            seen.append(f"{before:.2f} cores before")
            continue
        probe = noise.LoadProbe()
        work()
        during = probe.foreign_cores()
        after = _quiet_load()
        assert during is not None
        if during < max(before, after) + 0.4:
            return
        seen.append(f"{during:.2f} during, {before:.2f} before, {after:.2f} after")
    if all("during" not in s for s in seen):
        pytest.skip(f"other processes use {seen[-1]}: no room to tell our load from theirs")
    pytest.fail(f"our own work read as foreign load: {'; '.join(seen)}")


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_load_probe_sees_foreign_load_but_not_our_own() -> None:
    def spin_here() -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.8:
            pass

    def spin_in_a_child() -> None:
        # a child we started and waited for (as torch.compile runs g++) is ours too, though gone
        spin = "import time\nt=time.time()\nwhile time.time()-t<0.8: pass\n"
        subprocess.run([sys.executable, "-c", spin], check=True)

    _own_work_is_not_foreign(spin_here)
    _own_work_is_not_foreign(spin_in_a_child)
    # A busy process outside our process tree (double-forked, so not our child) is.
    floor = _quiet_load()
    busy = "import time\nt=time.time()\nwhile time.time()-t<3: pass\n"
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{busy}' >/dev/null 2>&1 &"], check=True)
    time.sleep(0.3)
    probe = noise.LoadProbe()
    time.sleep(1.5)
    foreign = probe.foreign_cores()
    assert foreign is not None and foreign > floor + 0.6


def test_peak_memory_tracks_an_allocation() -> None:
    memory.reset_peak(CPU)
    before = memory.peak(CPU).bytes
    big = torch.ones(200 * 2**20 // 4)  # 200 MiB, touched
    after = memory.peak(CPU)
    del big
    assert after.kind in ("rss", "rss-lifetime")
    assert after.bytes - before > 150 * 2**20


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux clear_refs")
def test_peak_memory_resets_per_phase() -> None:
    big = torch.ones(300 * 2**20 // 4)
    high = memory.peak(CPU).bytes
    del big
    memory.reset_peak(CPU)
    assert memory.peak(CPU).bytes < high - 200 * 2**20


class _PlantedLoad:
    """A LoadProbe that reports ``cores`` of other processes' work, whatever the machine does."""

    cores: float | None = 0.0

    def foreign_cores(self) -> float | None:
        return self.cores


def _plant_load(monkeypatch: pytest.MonkeyPatch, cores: float | None) -> None:
    monkeypatch.setattr(_PlantedLoad, "cores", cores)
    monkeypatch.setattr(env, "LoadProbe", _PlantedLoad)


def test_fingerprint_and_peak_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path))
    _plant_load(monkeypatch, 0.0)
    calls: list[torch.dtype] = []

    def fake(device: torch.device, dtype: torch.dtype, n: int, reps: int = 5) -> float:
        calls.append(dtype)
        return 1.5

    monkeypatch.setattr(env, "_matmul_tflops", fake)
    fp = env.fingerprint(CPU)
    assert fp.torch_version == torch.__version__ and fp.cores >= 1 and fp.cpu_model
    assert fp.peak_tflops_fp32 == 1.5
    n_first = len(calls)
    env.fingerprint(CPU)
    assert len(calls) == n_first, "peak FLOP/s was measured again instead of read from the cache"
    cached = json.loads((tmp_path / "peak_flops.json").read_text())
    assert any(k.startswith("cpu|") for k in cached)


def test_a_peak_measured_under_load_is_not_cached(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Issue 29: a peak measured beside another job was cached for ever, and every MFU after it
    # read 2.2x too high. Beside 1.5 cores of other work it serves its own run only.
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path))
    rate = {"now": 0.08}  # what the matmul achieves, set per phase (fp32 and bf16 alike)
    monkeypatch.setattr(env, "_matmul_tflops", lambda *a, **k: rate["now"])
    _plant_load(monkeypatch, 1.5)
    busy = env.fingerprint(CPU)
    assert busy.peak_tflops_fp32 == 0.08 and busy.peak_load == 1.5
    assert not (tmp_path / "peak_flops.json").exists()
    from torchpace.measure.noise import peak_loaded
    from torchpace.report.fmt import environment

    assert peak_loaded(busy.to_dict())
    assert "reads low, not cached" in environment(busy.to_dict())
    # Quiet: measured again, cached with its load, and read back without measuring.
    _plant_load(monkeypatch, 0.05)
    rate["now"] = 0.18
    quiet = env.fingerprint(CPU)
    assert quiet.peak_tflops_fp32 == 0.18 and quiet.peak_load == 0.05
    assert not peak_loaded(quiet.to_dict()) and "not cached" not in environment(quiet.to_dict())
    rate["now"] = 0.19
    assert env.fingerprint(CPU).peak_tflops_fp32 == 0.18  # read from the cache
    # --remeasure measures even with a cached figure, and caches the new quiet one.
    assert env.fingerprint(CPU, remeasure=True).peak_tflops_fp32 == 0.19
    (entry,) = json.loads((tmp_path / "peak_flops.json").read_text()).values()
    assert entry["fp32"] == 0.19 and entry["load"] == 0.05


def test_a_cached_peak_without_its_load_is_measured_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Entries cached before loads were kept may have been measured under load: not trusted.
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path))
    _plant_load(monkeypatch, None)  # no /proc: the load is unknown, the figure is cached
    monkeypatch.setattr(env, "_matmul_tflops", lambda *a, **k: 0.2)
    env.peak_tflops(CPU)
    path = tmp_path / "peak_flops.json"
    cache = json.loads(path.read_text())
    path.write_text(json.dumps({k: {"fp32": 0.05} for k in cache}))
    again = env.peak_tflops(CPU)  # measured again, not 0.05
    # bf16 is measured too on a CPU that runs it natively (AMX, AVX512-BF16): the GPU host's did
    # and the old exact-dict assertion failed there.
    bf16 = {"bf16": 0.2} if env.bf16_supported(CPU) else {}
    assert again == {"fp32": 0.2, **bf16, "load": None}


def test_env_remeasure_and_no_peak_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from torchpace.cli import main

    with pytest.raises(SystemExit, match="drop --no-peak"):
        main(["env", "--no-peak", "--remeasure"])


def test_damaged_peak_cache_is_remeasured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path))
    (tmp_path / "peak_flops.json").write_text("{not json")
    _plant_load(monkeypatch, 0.0)
    monkeypatch.setattr(env, "_matmul_tflops", lambda *a, **k: 2.0)
    assert env.peak_tflops(CPU)["fp32"] == 2.0


def test_real_peak_measurement_is_plausible() -> None:
    tflops = env._matmul_tflops(CPU, torch.float32, 512, reps=3)
    assert 0.001 < tflops < 100


def test_bf16_flag_matches_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    assert env.cpu_supports_bf16() == ("avx512_bf16" in text or "amx_bf16" in text)


@requires_cuda
def test_cuda_step_clock_times_queued_work() -> None:
    dev = torch.device("cuda")
    # torch.cuda._sleep spins the GPU for a number of cycles; the host returns at once, so only
    # events (or a synchronize) see the time.
    cycles = int(torch.cuda.get_device_properties(dev).clock_rate * 1e3 * 0.02)  # ~20 ms

    def step() -> Work:
        torch.cuda._sleep(cycles)
        return Work(samples=1)

    timing = measure_steps(step, steps=5, warmup=1, device=dev)
    assert timing.step.median == pytest.approx(0.02, rel=0.3)


@requires_cuda
def test_cuda_peak_memory_uses_the_allocator() -> None:
    dev = torch.device("cuda")
    memory.reset_peak(dev)
    x = torch.empty(64 * 2**20, dtype=torch.uint8, device=dev)
    pk = memory.peak(dev)
    del x
    assert pk.kind == "cuda-allocator" and pk.bytes >= 64 * 2**20


def test_load_probe_subprocess_smoke() -> None:
    code = textwrap.dedent(
        """
        from torchpace.measure.noise import LoadProbe
        p = LoadProbe()
        v = p.foreign_cores()
        print("none" if v is None else "ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() in ("ok", "none")


def test_the_fp32_peak_is_measured_at_full_float32_precision(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A script (or fast math) left TF32 on: the fp32 peak must not be a TF32 rate.
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path))
    in_force: list[tuple[torch.dtype, str]] = []

    def fake(device: torch.device, dtype: torch.dtype, n: int, reps: int = 5) -> float:
        in_force.append((dtype, torch.get_float32_matmul_precision()))
        return 1.0

    monkeypatch.setattr(env, "_matmul_tflops", fake)
    torch.set_float32_matmul_precision("high")
    try:
        env.peak_tflops(CPU, use_cache=False)
        assert torch.get_float32_matmul_precision() == "high"  # put back
    finally:
        torch.set_float32_matmul_precision("highest")
    assert in_force[0] == (torch.float32, "highest")


@pytest.mark.parametrize(
    ("name", "bf16"),
    [
        ("NVIDIA H100 80GB HBM3", 989.4),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.5),
        ("NVIDIA H200", 989.4),
        ("NVIDIA H200 NVL", 835.5),
        ("NVIDIA A100-SXM4-80GB", 312.0),
    ],
)
def test_vendor_peaks_tell_the_pcie_and_nvl_parts_from_the_sxm_ones(name: str, bf16: float) -> None:
    from torchpace.measure.peaks import known_gpu_peak

    assert known_gpu_peak(name, "bf16") == bf16


def test_trial_step_clock_syncs_once_and_reads_queued_work_from_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On CUDA a trial's steps are read from events, not from a synchronize at every step (which
    # serialised loading with compute and inflated the gain of workers, compile, fused kernels).
    from torchpace.measure.steps import StepClock

    device_ms = iter([0.0, 0.0, 50.0, 100.0, 150.0])  # the GPU finishes a step every 50 ms
    syncs: list[object] = []

    class FakeEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = 0.0

        def record(self, stream: object = None) -> None:
            self.at = next(device_ms)

        def synchronize(self) -> None:
            syncs.append("event")

        def elapsed_time(self, other: FakeEvent) -> float:
            return other.at - self.at

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: syncs.append("device"))
    clock = StepClock(torch.device("cuda", 0))
    for _ in range(4):
        clock.stamp()  # the host runs ahead: stamps microseconds apart
    assert syncs == ["device"] and clock.count == 4  # one sync, at the first step's end
    times = clock.times
    steps = [b - a for a, b in itertools.pairwise(times)]
    assert steps == pytest.approx([0.05, 0.05, 0.05], abs=2e-3)
