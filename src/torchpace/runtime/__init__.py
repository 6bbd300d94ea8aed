"""The floor the verbs share (issue 31): what the doctor, a script's trial, the tune and the plan
interposer each need while a script runs, kept below all of them so no verb imports another for
it. ``patching``: attributes replaced for a run and put back; ``stop``: the signal that ends a
script once its steps are measured; ``batches``: a batch's size and tokens; ``user_code``: whether a
frame is torch's or torchpace's; ``phases``: the phases a step's time is split into.

Nothing here imports a verb (``doctor``, ``script``, ``tune``, ``report``); tests/test_layers.py
keeps it so.
"""
