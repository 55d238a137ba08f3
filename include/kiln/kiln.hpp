#pragma once
/// \file
/// The umbrella header: everything public in kiln.

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/ir/attribute.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/ir/op_registry.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/type.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/runtime/device_buffer.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_event.hpp"
#include "kiln/runtime/device_function.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "kiln/runtime/device_graph_cache.hpp"
#include "kiln/runtime/device_graph_key.hpp"
#include "kiln/runtime/launch.hpp"
