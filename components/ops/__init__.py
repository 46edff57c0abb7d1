"""The commands' former module paths: `python -m components.ops.X` runs what moved, so scripts
and habits written against them keep working. Nothing imports from here."""
