"""Memory, evaluation and debugging techniques."""

from __future__ import annotations

from torchpace.techniques.facets import Facets, Fit, No, Planned

ENTRIES: tuple[Facets, ...] = (
    Facets(
        "activation-checkpointing",
        verb="checkpoint_activations",
        doctor=No("it trades step time for memory; the doctor ranks what saves time"),
        lint=No("which modules to checkpoint depends on the memory measured at run time"),
        plan=Planned(
            script=No("use torchpace.speedups.checkpoint_activations in the script"),
            edit=No("call torchpace.speedups.checkpoint_activations on the modules to checkpoint"),
            tune=No("it makes each step slower to save memory; the tune keeps what is faster"),
        ),
    ),
    Facets(
        "avoid-empty-cache",
        verb=No("a source change: delete the call"),
        doctor=No("a call to empty_cache is found in the source, by lint"),
        lint=True,
        plan=No("a change to the user's code, not a setting a plan holds"),
    ),
    Facets(
        "no-grad-eval",
        verb=No("a source change: evaluate under torch.no_grad() or inference_mode()"),
        doctor=No("the doctor measures training steps; evaluation runs outside them"),
        lint=True,
        plan=Fit("fit() evaluates under inference_mode; a script keeps its own evaluation"),
    ),
    Facets(
        "disable-debug-apis",
        verb=No("a source change: turn the debug switch off"),
        doctor=True,
        lint=True,
        plan=No("a change to the user's code, not a setting a plan holds"),
    ),
)
