"""Users' own training scripts, unmodified: tell a script from a recipe (``kind``), run one as
``python script.py`` would (``main``), and apply a ``Plan`` to it by interposition
(``interpose``) for the tune's script trials (``trial``) and ``torchpace run`` (``command``)."""
