"""The doctor against planted truth: fixture scripts whose costs are known by construction (a
dataset that sleeps a set time, ``.item()`` calls on marked lines, a validation loop, gradient
accumulation), run in this process, and the figures it reports checked against them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optimizer_module

from torchpace.doctor import script, watch
from torchpace.findings import DoctorFinding, jsonable
from torchpace.measure.noise import LoadProbe, verdict

# Measures time or load: `make test` runs it alone, never beside another test (pytest -m serial).
pytestmark = pytest.mark.serial

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _planted(name: str) -> dict[str, Any]:
    """A fixture script's upper-case literal constants (the planted values), read without running
    it: the scripts train at import."""
    tree = ast.parse((SCRIPTS / f"{name}.py").read_text())
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.isupper():
                out[target.id] = ast.literal_eval(node.value)
    return out


def _line(name: str, marker: str) -> int:
    """The line of ``# MARK: marker`` in a fixture script."""
    lines = (SCRIPTS / f"{name}.py").read_text().splitlines()
    (line,) = [i for i, text in enumerate(lines, 1) if text.endswith(f"# MARK: {marker}")]
    return line


def _gain(finding: DoctorFinding) -> float:
    """The estimated gain, also when a run beside other load withheld it (doctor/noise.py):
    these tests check the estimate, not the machine's quiet."""
    gain = finding.gain
    return finding.measured["withheld_gain"] if gain is None else gain


def _run(name: str, *args: str, steps: int, warmup: int, lint: bool = False) -> dict[str, Any]:
    """The doctor's result. The exact checks hold on a quiet machine, and the doctor judges
    only its measured windows (a few dozen ms here): a burst of another process's work during
    the warm-up or the set-up still moves the figures (a helper's lint beside the test made
    the input share fall under its bound on a run the doctor called quiet). So other
    processes' work over the whole run, by the tests' own probe, makes the run noisy too."""
    probe = LoadProbe()
    ran = script.run(str(SCRIPTS / f"{name}.py"), list(args), steps=steps, warmup=warmup, lint=lint)
    assert (ran.exit_code, ran.outcome) == (0, "stopped after the measured steps")
    assert ran.result is not None
    assert ran.result["run"]["optimizer_steps_seen"] == warmup + 1 + steps
    whole_run = probe.foreign_cores()
    if not ran.result["noise"]["noisy"] and verdict(0.0, whole_run):
        ran.result["noise"] = {**ran.result["noise"], "noisy": True, "whole_run_cores": whole_run}
    return ran.result


def test_a_sleeping_dataset_is_measured_as_data_wait_and_ranked_first() -> None:
    planted = _planted("slow_data")
    sleep_per_step = planted["SLEEP_S"] * planted["BATCH"]  # 32 ms
    result = _run("slow_data", steps=10, warmup=2, lint=True)

    data = result["breakdown"]["data"]
    if result["noise"]["noisy"]:
        # Beside CPU-bound processes each of the 4 sleeps wakes a scheduler slice late (36.6
        # ms seen for 32, and 61 ms at load average 8): never less than the plant, and a part
        # of the step; how late the wake-ups come is the load's, so no fixed upper bound.
        median = data["seconds"]["median"]
        assert sleep_per_step <= median <= result["step_seconds"]["median"]
    else:
        assert data["seconds"]["median"] == pytest.approx(sleep_per_step, rel=0.10)
        # A share is a phase's total over the kept steps' total (a ratio of totals, not medians).
        expected_share = sleep_per_step * result["steps"]["kept"] / result["measured_s"]
        assert data["share"] == pytest.approx(expected_share, rel=0.10)
    assert result["samples_per_step"] == planted["BATCH"]

    top = result["findings"][0]
    assert (top.pattern, top.technique) == ("input-bound", "loader-workers")
    # the run's own finding: lint's TP101 is silent on a CPU-only script since issue 32's
    # sixth session (its verdict rules: a finding is true on a GPU run); the doctor measures
    # whether workers pay here (lint and the run merging into one entry: test_merge.py)
    assert (top.source, top.code) == ("runtime", None)
    assert top.measured["basis"] == "measured worker pace"
    step = result["step_seconds"]["median"]
    # the rest of the step as the estimate reads it: the median step less its data share (a
    # ratio of totals); the median step less the median wait differed by 2-3 ms in one run in 3
    rest = step * (1 - data["share"])
    if not result["noise"]["noisy"]:
        # A sleeping loader is idle, not computing: workers hide its wait as far as their pace
        # goes, measured on the dataset after the run: k workers make a batch every 32 / k ms.
        assert result["data_cpu_fraction"] < 0.1
        paces = result["loader_rates"]["seconds_per_batch"]
        for k in (1, 2):  # a core each: the plant's pace
            assert paces[str(k)] == pytest.approx(sleep_per_step / k, rel=0.25)
        # Four workers share two cores with the training process: the plant is the floor (a
        # sleep is never shorter), and they are faster than one; 10.2 and 12.8 ms for the
        # planted 8 failed a 25% bound on a quiet machine, and faster than two failed on a
        # quiet clean clone at 88f81bc (19.3 ms against 17.8: four processes' collating and
        # hand-over on two cores).
        assert 0.9 * sleep_per_step / 4 <= paces["4"] < paces["1"], paces
        best = max(rest, min(paces[k] for k in ("1", "2", "4")))  # the pace measured best
        assert _gain(top) == pytest.approx(1 - best / step, abs=0.06)
        # the fewest workers that reach the best step: 2 or 4, the rest of the step near 16 ms
        assert re.search(r"N=[24] was fastest here", top.fix)
    else:  # the step's rest stretches with the load: what holds is the bound of the wait
        assert 0 < _gain(top) <= data["share"] + 0.05
    assert (top.path, top.line) == (
        str(SCRIPTS / "slow_data.py"),
        _line("slow_data", "loader"),
    )
    (loader,) = result["loaders"]
    assert (loader["role"], loader["num_workers"], loader["dataset"]) == ("train", 0, "SlowDataset")


def test_a_cpu_bound_loaders_gain_is_what_the_cores_can_take() -> None:
    # Issue 18: a VAE's MNIST loading (CPU work in the training process) was estimated at
    # 53-62% from the wait alone; one or two workers on 2 cores made its steps slower. Here the
    # model is tiny: the loading's CPU runs on the cores while the step waits, so workers hide
    # the wait as far as the cores go: about half of it on 2 cores.
    from torchpace.measure.cores import usable_cores

    result = _run("slow_data", "--busy", steps=6, warmup=2)
    cpu = result["data_cpu_fraction"]
    share = result["breakdown"]["data"]["share"]
    top = result["findings"][0]
    assert top.pattern == "input-bound"
    if result["noise"]["noisy"]:
        # Other processes hold the cores: the loading's CPU share, and so what workers could
        # take, is the load's to decide. The doctor said so (noisy); what holds is that no
        # estimate promises more than the wait itself.
        assert _gain(top) <= share + 0.05
        return
    if top.technique == "fast-input-format":
        # The workers' pace, measured after the run, did not shorten the step: a moment of
        # other load the noise check did not catch (a clean clone's make test at bcabb0f, once
        # in four runs of this test). The doctor then says workers would not help and points at
        # the samples, whose fix (made once, ahead of the loop) removes up to the wait: what
        # holds is that it says why and promises no more than the wait.
        assert "would not shorten" in top.message
        assert _gain(top) <= share + 0.05
        return
    assert top.technique == "loader-workers"
    assert cpu > 0.5  # the dataset spins: the wait is this process's CPU
    # No more than spreading the loading over the cores allows; clearly more than nothing (the
    # workers' pace is measured, so other load on the machine lowers it: a wider floor then).
    ceiling = share * (1 - cpu / usable_cores())
    assert _gain(top) <= ceiling + 0.05
    # Clearly more than nothing: the workers' pace of a spinning dataset is the scheduler's to
    # give (0.3328 against a floor of ceiling - 0.15 = 0.3330 on a quiet machine). On the 2-core
    # EPYC, six quiet runs in a row gave 0.22-0.43 against ceilings of 0.45-0.54, the lowest
    # beside 0.21 cores of other processes (under the doctor's 0.25 noise limit), and make
    # test's serial part 0.143 against 0.439: the floor is a quarter of the ceiling.
    assert _gain(top) >= max(0.1, ceiling / 4)
    assert top.measured["cores"] == usable_cores()


def test_a_loader_beside_a_step_that_fills_the_cores_points_at_the_samples_not_workers() -> None:
    # The VAE itself: torch's threads fill both cores while the step computes, and a worker's
    # loading takes a core from them mid-op (11 ms steps became 13 ms with one worker). The
    # wait is named, with why workers would not shorten it, and the fix that would: samples
    # made once (the VAE's images as tensors: 1.44x estimated, 1.30x measured by hand A/B,
    # estimate_ab.py).
    result = _run("slow_data", "--busy", "--compute", steps=6, warmup=2)
    if result["env"]["torch_threads"] < result["env"]["cores"]:
        pytest.skip("torch's threads leave cores free here: workers may help")
    share = result["breakdown"]["data"]["share"]
    waits = [f for f in result["findings"] if f.pattern == "input-bound"]
    if result["noise"]["noisy"]:
        # Beside other CPU-bound processes the step's compute stretches (the data share fell
        # to 8-10%), and whether a core is free for a worker is theirs to decide: either fix,
        # never more than the wait.
        assert all(w.technique in ("fast-input-format", "loader-workers") for w in waits)
        assert all(_gain(w) <= share + 0.05 for w in waits)
        return
    assert share > 0.2
    (wait,) = waits
    assert wait.technique == "fast-input-format"
    assert _gain(wait) == pytest.approx(share)
    assert "loader workers would not shorten it" in wait.message


def test_loader_workers_are_not_reported_as_processes_the_script_started() -> None:
    result = _run("slow_data", "--workers", "2", steps=4, warmup=1)
    assert result["run"]["child_processes"] == []
    assert result["loaders"][0]["num_workers"] == 2


def test_item_calls_are_counted_at_their_lines_with_exact_per_step_counts() -> None:
    log_every = _planted("syncs")["LOG_EVERY"]
    steps = 2 * log_every  # every window of 2 * LOG_EVERY steps holds exactly 2 logging steps
    result = _run("syncs", steps=steps, warmup=2)

    path = str(SCRIPTS / "syncs.py")
    rows = {
        r["line"]: (r["path"], r["call"], r["count"], r["per_step"], r["every_step"])
        for r in result["syncs"]
    }
    assert rows == {
        _line("syncs", "once"): (path, ".item()", steps, 1.0, True),
        # model.parameters() of one nn.Linear: weight and bias, so two calls per step.
        _line("syncs", "twice"): (path, ".item()", 2 * steps, 2.0, True),
        _line("syncs", "cadence"): (path, ".item()", 2, 2 / steps, False),
    }
    # Only the every-step reads become findings; on CPU their gain is not estimated.
    flagged = sorted(f.line for f in result["findings"] if f.pattern == "sync-every-step")
    assert flagged == sorted([_line("syncs", "once"), _line("syncs", "twice")])


def test_a_cpu_only_scripts_host_reads_are_counted_but_not_findings(tmp_path: Path) -> None:
    # Issue 29: sync findings on a script that never uses an accelerator, where a read blocks
    # nothing. The same planted script with its device fixed to the CPU: the reads are counted,
    # no finding, and the skipped pattern says why.
    source = (SCRIPTS / "syncs.py").read_text()
    line = next(x for x in source.splitlines() if x.endswith("# MARK: device"))
    cpu_only = tmp_path / "syncs_cpu.py"
    cpu_only.write_text(source.replace(line, 'device = "cpu"'))
    ran = script.run(str(cpu_only), [], steps=4, warmup=1, lint=False)
    assert ran.result is not None and ran.result["syncs"]
    assert "sync-every-step" not in [f.pattern for f in ran.result["findings"]]
    assert ran.result["skipped_patterns"]["sync-every-step"].startswith(
        "a CPU run of a script that never uses an accelerator"
    )


@pytest.mark.parametrize("args", [[], ["--loader"]], ids=["tensors", "tensor-dataset"])
def test_a_compute_bound_script_is_not_called_input_bound(args: list[str]) -> None:
    result = _run("compute_only", *args, steps=4, warmup=1)
    assert [f for f in result["findings"] if f.pattern == "input-bound"] == []
    if args:
        assert [ld["role"] for ld in result["loaders"]] == ["train"]
    else:
        assert result["loaders"] == []
        assert "input-bound" in result["skipped_patterns"]


def test_validation_steps_are_excluded_and_its_loader_is_not_data_wait() -> None:
    planted = _planted("with_validation")
    steps, warmup = 9, 2
    result = _run("with_validation", steps=steps, warmup=warmup)

    # Validation runs after optimizer steps 3, 6, 9 and 12, so inside steps 4, 7 and 10: three
    # of the measured steps 4..12 (the one after step 12 never runs: the doctor stops there).
    assert result["steps"]["measured"] == steps
    assert result["steps"]["excluded"] == {"evaluation": 3}
    assert result["steps"]["kept"] == steps - 3
    assert [(ld["role"], ld["dataset"]) for ld in result["loaders"]] == [
        ("train", "list"),
        ("other", "SlowVal"),
    ]
    val_wait = (
        planted["VAL_BATCHES"] * planted["BATCH"] * planted["SLEEP_S"]
    )  # 60 ms per validation
    data = result["breakdown"]["data"]
    # A validation counted as data wait holds its planted sleeps, never shorter than 60 ms; the
    # training loader's own fetch is a few ms quiet and was 9.8 ms beside two CPU-bound
    # processes (a bound of val_wait / 10 failed there), so half a validation separates them.
    assert data["seconds"]["median"] < val_wait / 2
    # Counted as data wait, 3 x 60 ms in 9 steps would be a quarter or more of the time on a
    # quiet machine. With other processes on the cores, the training loader's own fetch takes
    # their time slices too (8% of the step seen beside two CPU-bound processes): the doctor
    # says noisy, and the validation's 180 ms must still be nowhere in the data time.
    kept = result["steps"]["kept"]
    assert data["seconds"]["median"] * kept < 3 * val_wait / 2
    if not result["noise"]["noisy"]:
        assert data["share"] < 0.05
        assert [f for f in result["findings"] if f.pattern == "input-bound"] == []


def test_gradient_accumulation_counts_micro_steps() -> None:
    planted = _planted("grad_accum")
    result = _run("grad_accum", steps=4, warmup=1)
    assert result["micro_steps"] == planted["ACCUM"] == 2
    assert result["samples_per_step"] == planted["ACCUM"] * planted["BATCH"]


def test_a_hand_written_update_without_an_optimizer_is_stepped_at_backward() -> None:
    # Issue 18: pytorch/examples' word language model (p.data.add_, no optimizer) ended in "no
    # optimizer.step() observed" after 869 backward() calls.
    planted = _planted("manual_sgd")
    result = _run("manual_sgd", steps=6, warmup=2)
    assert result["run"]["steps_marked_by"] == "backward()"
    assert result["micro_steps"] == 1
    assert result["samples_per_step"] == planted["BATCH"]
    # Each step holds one update (it falls at the start of the step after its backward): the
    # planted 100 ms sleep, timed outside forward and backward; two updates would be 200 ms and
    # more, since a sleep is never shorter. Beside CPU-bound processes the 600-parameter MLP's
    # forward-backward and the update's own arithmetic stretch to 50 ms and more (a 152 ms step
    # and a 52 ms backward failed fixed bounds in make test beside two hogs), so only planted
    # sleeps bound the figures: the sleep's phase holds one sleep and less than two, and the
    # backward phase does not hold it (the sleep is in "other", at least 100 ms of it, once).
    median = result["step_seconds"]["median"]
    assert median >= planted["UPDATE_S"]
    update = result["breakdown"]["other"]["seconds"]["median"]
    assert planted["UPDATE_S"] <= update < 2 * planted["UPDATE_S"]


def test_an_lbfgs_step_holds_its_closures() -> None:
    planted = _planted("lbfgs")
    result = _run("lbfgs", steps=4, warmup=1)
    assert result["run"]["steps_marked_by"] == "optimizer.step()"
    assert result["micro_steps"] == planted["MAX_ITER"]  # backward() calls per step
    # The closure's forward passes re-read the same batch: one batch per step, not MAX_ITER.
    assert result["samples_per_step"] == planted["BATCH"]
    # The closures' forward passes are timed as forward, not as the optimizer's time.
    forward = result["breakdown"]["forward"]["seconds"]["median"]
    planted_forward = planted["MAX_ITER"] * planted["FORWARD_S"]  # sleeps: at least this
    assert forward >= planted_forward
    assert forward > 2 * result["breakdown"]["optimizer"]["seconds"]["median"]


def test_time_in_the_scripts_own_input_function_is_named_at_its_line() -> None:
    # Issue 18: a GPT script's get_batch() (memmap, no DataLoader) was "other" with no line, and
    # the input-bound pattern was "not checked: no DataLoader feeds the training steps".
    planted = _planted("custom_input")
    # 40 steps of 100 ms: about 400 samples, so the sampling error of a 30% share is 2.3 points
    # (less: the jittered samples are spread through each step); ±7 points are three of them.
    result = _run("custom_input", steps=40, warmup=2)
    truth = planted["GET_S"] / result["step_seconds"]["median"]  # about 30%
    spots = result["hot_spots"]["spots"]
    top = spots[0]
    assert (top["function"], top["phase"]) == ("get_batch", "other")
    assert top["line"] == _line("custom_input", "get_batch")
    # Beside CPU-bound processes the sampling thread waits for the CPU too, and its samples
    # fall less evenly: the spot is still named, its share within a wider band.
    tol = 0.15 if result["noise"]["noisy"] else 0.07
    assert top["share"] == pytest.approx(truth, abs=tol)
    finding = next(f for f in result["findings"] if f.pattern == "input-bound")
    assert finding.technique == "loader-workers"
    assert (finding.path, finding.line) == (
        str(SCRIPTS / "custom_input.py"),
        _line("custom_input", "get_batch"),
    )
    assert _gain(finding) == pytest.approx(truth, abs=tol)
    assert "get_batch" in finding.message


def test_too_few_samples_name_no_spot() -> None:
    # pytorch/examples' regression script: 10 steps of 0.2 ms, one sample, in get_batch(), was
    # "100% of the step", and --verify's promised speed-up for it was infinite (the JSON
    # writer refused it).
    from collections import Counter

    from torchpace.doctor.sampler import MIN_SAMPLES, Spot, hot_spots
    from torchpace.doctor.verify import _promised

    one = Counter({(5, "other", Spot("a.py", "get_batch", 1, 2)): 1})
    assert hot_spots(one, {5}) == {"interval_s": 0.01, "samples": 1, "spots": []}
    enough = Counter({(5, "other", Spot("a.py", "get_batch", 1, 2)): MIN_SAMPLES})
    assert hot_spots(enough, {5})["spots"][0]["share"] == 1.0
    assert _promised(1.0) is None and _promised(0.5) == 2.0


def test_a_dataloader_wait_is_charged_to_the_datasets_own_line() -> None:
    # 25 steps of about 40 ms: about 100 samples at 10 ms. A share of 0.84 sampled 100 times has
    # a standard error of 3.7 points, so 5 points failed about one run in six (0.784 against
    # 0.840 in a quiet make test): three standard errors, 11 points; 15 beside other work.
    result = _run("slow_data", steps=25, warmup=1)
    top = result["hot_spots"]["spots"][0]
    assert (top["function"], top["phase"]) == ("SlowDataset.__getitem__", "data")
    tol = 0.15 if result["noise"]["noisy"] else 0.11  # a starved sampling thread: wider
    assert top["share"] == pytest.approx(result["breakdown"]["data"]["share"], abs=tol)


def test_module_transforms_in_a_dataset_are_data_not_models_and_their_reads_not_syncs() -> None:
    # Issue 20: torchvision transforms are nn.Modules; 43-44% of an image pipeline's data wait
    # was timed as forward, Normalize was listed as a model, and a dataset's int(tensor) on CPU
    # tensors was ranked first as a GPU sync.
    planted = _planted("module_transforms")
    result = _run("module_transforms", steps=8, warmup=2)
    wait = planted["SLEEP_S"] * planted["BATCH"]
    data = result["breakdown"]["data"]["seconds"]["median"]
    assert data >= 0.95 * wait
    # Timed as forward, the transforms' sleeps would put 95% of the wait there; the Linear's own
    # forward is a fraction of a millisecond, a few beside CPU-bound processes.
    assert result["breakdown"]["forward"]["seconds"]["median"] < 0.5 * wait
    assert result["settings"]["models"] == ["Linear"]
    host_read = _line("module_transforms", "host read")
    assert [r for r in result["syncs"] if r["line"] == host_read] == []
    assert [f for f in result["findings"] if f.pattern == "sync-every-step"] == []


def test_a_float64_model_gets_its_finding_at_the_training_forward() -> None:
    # Issue 20: a model running in float64 was reported as fp32 and got no finding (float32
    # measured 1.77x faster there).
    result = _run("float64_model", steps=4, warmup=1)
    assert result["settings"]["param_dtypes"] == ["float64"]
    found = [f for f in result["findings"] if f.pattern == "float64-compute"]
    if not found and result["noise"]["noisy"]:
        # Beside other CPU-bound processes the replay's two timings of the same calls are the
        # load's: float32 can come out no faster, and then nothing is promised. The doctor
        # said the run was noisy; the float64 parameters are still named.
        assert result["precision"]["from"] == "float64"
        return
    (finding,) = found
    assert finding.technique == "float32-not-float64"
    compute = result["breakdown"]["forward"]["share"] + result["breakdown"]["backward"]["share"]
    # timed on the model's own calls in float64 and float32: a 64x256x1024 matmul and its tanh
    # run about twice as fast in float32 (half the SIMD lanes), so a large part of the compute
    assert finding.measured["basis"] == "timed on the model's calls"
    assert result["precision"]["from"] == "float64" and result["precision"]["to"] == "float32"
    converted = compute + result["breakdown"]["optimizer"]["share"]
    # on a noisy run the replay's two timings are the load's: a gain, no floor
    assert (0.0 if result["noise"]["noisy"] else 0.15) <= _gain(finding) <= converted
    assert (finding.path, finding.line) == (
        str(SCRIPTS / "float64_model.py"),
        _line("float64_model", "forward"),
    )
    assert "float64" in result["skipped_patterns"]["float32-compute"]


def test_a_compiled_model_is_never_traced_with_global_hooks_in_place() -> None:
    # Issue 20: global module hooks under torch.compile cost time per step, and torch warns
    # about them at every call of the compiled model.
    import warnings

    from torch.nn.modules import module as module_mod

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _run("compiled_eager", steps=4, warmup=4)
    global_hook_warnings = [w for w in caught if "global hooks on modules" in str(w.message)]
    # The first call (before the doctor sees it is compiled) and the probe step, whose FLOP
    # counter (torch's ModTracker) hooks every module; not every warm-up call (it was 5 here).
    assert len(global_hook_warnings) <= 2
    assert result["settings"]["compiled"] and result["settings"]["models"] == ["OptimizedModule"]
    assert result["steps"]["excluded"] == {}  # no recompilation once the hooks went
    assert not module_mod._global_forward_pre_hooks and not module_mod._global_forward_hooks


def test_watch_ends_an_endless_loop_quietly_after_the_steps() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 4)
    hooks = len(optimizer_module._global_optimizer_post_hooks)
    with watch(steps=3, warmup=1, lint=False) as d:
        while True:
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    result = d.result
    assert result["outcome"] == "stopped after the measured steps"
    assert result["run"]["optimizer_steps_seen"] == 1 + 1 + 3
    assert result["steps"] == {"warmup": 1, "probe": 1, "measured": 3, "kept": 3, "excluded": {}}
    assert result["micro_steps"] == 1
    assert result["samples_per_step"] == 8
    assert len(optimizer_module._global_optimizer_post_hooks) == hooks  # the step hook is gone


def test_planted_padding_is_measured_exactly_and_points_at_the_loader() -> None:
    planted = _planted("padded_tokens")
    share = (planted["BATCH"] - 1) * (planted["LONG"] - planted["SHORT"])
    share /= planted["BATCH"] * planted["LONG"]
    result = _run("padded_tokens", steps=6, warmup=2)
    padding = result["padding"]
    assert padding["share"] == pytest.approx(share)  # 0.766: every batch is alike
    assert padding["tokens_per_step"] == planted["BATCH"] * planted["LONG"]
    (finding,) = [f for f in result["findings"] if f.pattern == "padding-waste"]
    assert finding.technique == "length-bucketing"
    assert finding.line == _line("padded_tokens", "loader")
    assert finding.measured["padding_share"] == pytest.approx(share)
    compute = result["breakdown"]["forward"]["share"] + result["breakdown"]["backward"]["share"]
    assert _gain(finding) == pytest.approx(share * compute)
    # The result's new `padding` figures are in the published schema.
    from jsonschema import Draft202012Validator

    schema = json.loads((SCRIPTS.parents[2] / "docs" / "doctor-result.schema.json").read_text())
    plain = jsonable(result)  # as the result file holds it
    assert [e.message for e in Draft202012Validator(schema).iter_errors(plain)] == []
    # The report words the share as one of the tokens, not of the step.
    from torchpace.report import fmt

    assert fmt.measured(finding.measured).startswith("padding 77% of the tokens, compute ")
    from torchpace.report import document

    throughput = next(s for s in document("doctor", result).sections if s.id == "throughput")
    facts = dict(throughput.blocks[0].items)  # type: ignore[union-attr]
    assert facts["padding"] == "77% of the tokens in the training batches (392 of 512 per step)"


def test_unpadded_token_ids_are_not_taken_for_padding() -> None:
    result = _run("padded_tokens", "--no-pad", steps=6, warmup=2)
    # Random ids end in varied values: a stray run of the commonest last id is a row or two.
    assert result["padding"]["share"] < 0.01
    assert "padding-waste" not in {f.pattern for f in result["findings"]}


def test_a_training_finding_points_at_the_training_forward_not_an_earlier_evaluation() -> None:
    # Issue 20: the bf16 finding pointed at nanoGPT's estimate_loss() (it evaluates before it
    # trains) and at a Lightning validation_step, instead of the training forward.
    import inspect

    from torchpace.doctor.result import _forward_site
    from torchpace.doctor.session import Session
    from torchpace.runtime.stop import DoctorStop

    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    session = Session(steps=2, warmup=1, stop=True)
    session.start()
    try:
        with torch.no_grad():
            model(x)  # evaluation first, on an earlier line
        while True:
            loss = model(x).sum()  # MARK-TRAIN
            opt.zero_grad()
            loss.backward()
            opt.step()
    except DoctorStop:
        pass
    finally:
        session.finish()
    lines, start = inspect.getsourcelines(
        test_a_training_finding_points_at_the_training_forward_not_an_earlier_evaluation
    )
    train_line = start + next(i for i, t in enumerate(lines) if t.rstrip().endswith("MARK-TRAIN"))
    assert _forward_site(session, None) == (str(Path(__file__).resolve()), train_line)


def test_a_dataset_that_reads_per_sample_fetches_without_the_read_instruments() -> None:
    # Issue 20: a VAE's MNIST dataset reads int(target), .numpy() and a bool per sample, 384
    # reads a batch through the wrapper: +7% on its 11 ms step. Once a fetch has made more than
    # SWAP_READS reads, that loader's fetches run with the plain methods; the loop's reads are
    # still counted.
    from torchpace.doctor.syncs import SWAP_READS

    wrapped: list[bool] = []

    class Reads(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 10_000

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            wrapped.append("__int__" in vars(torch.Tensor))
            x = torch.full((4,), float(i % 7))
            for _ in range(SWAP_READS):  # one sample alone passes the line
                int(x[0])
            return x, torch.tensor(i % 2)

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Reads(), batch_size=2)
    with watch(steps=3, warmup=1, lint=False) as d:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()  # a read in the loop: still a sync row
    assert wrapped[:2] == [True, True]  # the first fetch, through the wrappers
    assert not any(wrapped[2:])  # every later fetch without them
    assert "__int__" not in vars(torch.Tensor)  # nothing left behind
    (row,) = d.result["syncs"]
    assert (row["call"], row["per_step"], row["every_step"]) == (".item()", 1.0, True)


def test_text_whose_rows_end_in_spaces_is_not_padding() -> None:
    from torchpace.doctor.loaders import padding_of

    # x-transformers' enwik8 script: one 33-byte row a batch, its trailing spaces taken for 7%
    # padding and a length-bucketing finding.
    row = torch.tensor([list(b"    return self.value  # done    ")])
    assert padding_of(row) == (row.numel(), 0, 0)
    # rows of text, a third of them ending in a space: no pad value most rows end with
    text = b"def f(x):\n    return x + 1\nclass A:\n    pass\nimport os\nprint(os.sep)\n"
    rows = torch.tensor([list(text[7 * i : 7 * i + 24]) for i in range(6)])
    rows[:, -1] = torch.tensor(list(b" s+ )n"))
    assert padding_of(rows) == (rows.numel(), 0, 0)
    # a padded batch: every row but the longest ends with the pad
    padded = torch.tensor(
        [[5, 6, 7, 8, 9, 10, 11, 12], [5, 6, 7, 0, 0, 0, 0, 0], [5, 6, 0, 0, 0, 0, 0, 0]]
    )
    assert padding_of(padded) == (24, 11, 0)
    # padded to a fixed length of 10: even the longest row carries 2 pads, 6 of the batch's 17
    fixed = torch.nn.functional.pad(padded, (0, 2))
    assert padding_of(fixed) == (30, 17, 6)
