"""The seed's module name: ``from kiln import compilation; compilation.stage(fn)(...)``."""

from . import as_subgraph  # noqa: F401
from ._kiln import CompiledCallable, StagedGraph, SubgraphCache, stage  # noqa: F401
