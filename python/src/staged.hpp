#pragma once
// Internal to kiln's Python extension: a staged graph with its Python trees.

#include <memory>

#include "bindings.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln::python {

/// kiln.StagedGraph: the C++ staged graph, and the trees of the Python arguments and
/// result (what calls flatten against and rebuild outputs with).
struct PyStaged {
  StagedGraph staged;
  PyTree in_tree;
  PyTree out_tree;
};

}  // namespace kiln::python
