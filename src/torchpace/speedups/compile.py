"""torch.compile, in place (``Module.compile``), so the model object the user holds stays the
same one (its state_dict keys keep no ``_orig_mod.`` prefix and prepare() returns it as given)."""

from __future__ import annotations

import shutil
import sys

from torch import nn

from torchpace.speedups.applied import Applied, done, skipped

TECHNIQUE = "torch-compile"
# Set on a forward compiled in place by compile_forward: what the module pickles leaves it out
# (runtime.modules), so a script's torch.save(model) or copy.deepcopy(model) still works.
COMPILED_HERE = "_torchpace_compiled_forward"
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_model(
    model: nn.Module, *, mode: str = "default", fullgraph: bool = False, dynamic: bool | None = None
) -> Applied:
    """Compile ``model``'s forward on its first call. The compile time is paid then (about 14 s
    cold for the cnn workload on the 2-core AMX Xeon, torch 2.13), so it pays off on long runs."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    why = _why_not(model)
    if why:
        return skipped(TECHNIQUE, why)
    if getattr(model, "_compiled_call_impl", None) is not None:
        return done(TECHNIQUE, [], reason="already compiled")
    model.compile(mode=mode, fullgraph=fullgraph, dynamic=dynamic)
    return done(TECHNIQUE, [f"forward compiled on first call (mode={mode})"])


def compile_forward(model: nn.Module, *, mode: str = "default") -> Applied:
    """Compile ``model.forward`` alone, in place: the module's hooks stay outside the compiled
    code. ``torchpace run`` and the tune's script trials interpose through forward hooks, which
    ``Module.compile`` would trace into its graph."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    why = _why_not(model)
    if why:
        return skipped(TECHNIQUE, why, warn=False)
    if getattr(model.forward, "_torchdynamo_orig_callable", None) is not None:
        return done(TECHNIQUE, [], reason="forward already compiled")
    import torch

    # nn.Module's own setattr, not the model's: a wrapper that hands attribute writes on to the
    # module it wraps (Lightning Fabric's _FabricModule does) would make the inner module's
    # forward call the wrapper's compiled forward, which calls the inner one: a RecursionError.
    compiled = torch.compile(model.forward, mode=mode)  # type: ignore[arg-type]
    setattr(compiled, COMPILED_HERE, True)
    nn.Module.__setattr__(model, "forward", compiled)  # type: ignore[arg-type]
    return done(TECHNIQUE, [f"{type(model).__name__}.forward compiled on first call ({mode})"])


def _why_not(model: nn.Module) -> str:
    """Why torch.compile cannot run here, or ""."""
    from torchpace.measure.compat import dynamo_supported

    if not dynamo_supported():
        return f"torch.compile does not support Python {sys.version.split()[0]}"
    on_cpu = all(p.device.type == "cpu" for p in model.parameters())
    if on_cpu and shutil.which("g++") is None and shutil.which("c++") is None:
        return "compiling for the CPU needs a C++ compiler (g++); none found"
    return ""
