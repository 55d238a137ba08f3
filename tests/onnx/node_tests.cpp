// ONNX's backend node tests through kiln: every case (model.onnx and test_data_set_0 of
// `onnx/backend/test/data/node`, from the onnx wheel) whose ops kiln supports is imported,
// compiled and run, and evaluated by the reference interpreter; both must match ONNX's
// expected outputs within ONNX's tolerances (rtol 1e-3, atol 1e-7). Cases that cannot pass
// for a stated reason are listed, with it, in tests/onnx/known_failures.txt (and
// docs/onnx.md); a listed case that passes is an error too, so that the list stays true.
//
//   kiln_onnx_node_tests DATA_DIR KNOWN_FAILURES [--table] [--filter TEXT] [--verbose]
//
// Exits 1 on an unexpected result. --table prints op -> cases -> passed.

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/file.hpp"
#include "kiln/onnx/import.hpp"

namespace fs = std::filesystem;

namespace {

std::string squash(const std::string& s) {
  std::string out;
  for (const char c : s)
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// The op a case tests: the longest op type, of its nodes or of kiln's supported ones, that
/// its name starts with (names compared without underscores and case), else its first
/// node's. (`test_reduce_l1_keep_dims_expanded` tests ReduceL1 through Abs and ReduceSum.)
std::string case_op(const std::string& name, const onnx::ModelProto& model,
                    const std::set<std::string>& supported) {
  const std::string key = squash(name.substr(5));  // after "test_"
  std::string best;
  const auto consider = [&](const std::string& type) {
    if (key.rfind(squash(type), 0) == 0 && type.size() > best.size()) best = type;
  };
  for (const auto& node : model.graph().node()) consider(node.op_type());
  for (const std::string& type : supported) consider(type);
  if (best.empty() && model.graph().node_size() > 0) best = model.graph().node(0).op_type();
  return best;
}

/// Empty when \p got matches \p want, else what differs.
std::string compare(const kiln::Tensor& got, const kiln::Tensor& want) {
  std::ostringstream os;
  if (got.dtype() != want.dtype()) {
    os << "dtype " << got.dtype() << ", expected " << want.dtype();
    return os.str();
  }
  if (got.shape() != want.shape()) {
    os << "shape " << got.shape() << ", expected " << want.shape();
    return os.str();
  }
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  const bool exact = !kiln::is_floating(want.dtype());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double a = g[i], e = w[i];
    if (std::isnan(e) ? std::isnan(a)
        : exact       ? a == e
                      : (a == e || std::abs(a - e) <= 1e-7 + 1e-3 * std::abs(e)))
      continue;
    os << "element " << i << " is " << a << ", expected " << e;
    return os.str();
  }
  return {};
}

struct Outcome {
  std::string op;
  bool in_scope = false;
  bool old_opset = false;     // an op below the oldest opset kiln reads it at, by design
  bool not_in_kiln = false;   // a dtype or value type kiln has no counterpart for
  bool fixed_inputs = false;  // passed with integer and scalar inputs fixed at import
  std::string failure;        // empty: passed
};

/// The messages of failures whose reason is a dtype or value kind kiln does not have.
bool is_missing_type(const std::string& message) {
  return message.find("which kiln has no counterpart for") != std::string::npos ||
         message.find("is not a tensor (sequences") != std::string::npos;
}

Outcome run_case(const fs::path& dir, const std::set<std::string>& supported) {
  Outcome out;
  onnx::ModelProto model;
  const std::string bytes =
      kiln::read_regular_file((dir / "model.onnx").string(), "an ONNX model", 1u << 30);
  if (!model.ParseFromString(bytes)) {
    out.failure = "model.onnx does not parse";
    return out;
  }
  out.op = case_op(dir.filename().string(), model, supported);
  out.in_scope = true;
  std::int64_t opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  for (const auto& node : model.graph().node()) {
    if (!node.domain().empty() || supported.count(node.op_type()) == 0)
      out.in_scope = false;
    else if (opset < kiln::onnx_op_oldest_opset(node.op_type()) && opset < kiln::kOnnxMinOpset)
      out.old_opset = true;
  }
  if (!out.in_scope || out.old_opset) return out;
  for (const auto* values : {&model.graph().input(), &model.graph().output()})
    for (const auto& v : *values)
      if (!v.type().has_tensor_type()) {
        out.failure = "value '" + v.name() + "' is not a tensor (sequences and optionals)";
        out.not_in_kiln = true;
        return out;
      }
  try {
    std::vector<kiln::Tensor> inputs, expected;
    const fs::path data = dir / "test_data_set_0";
    const auto pb = [&](const char* kind, std::size_t i) {
      return data / (std::string(kind) + "_" + std::to_string(i) + ".pb");
    };
    for (std::size_t i = 0; fs::exists(pb("input", i)); ++i)
      inputs.push_back(kiln::load_onnx_tensor(pb("input", i).string()));
    for (std::size_t i = 0; fs::exists(pb("output", i)); ++i)
      expected.push_back(kiln::load_onnx_tensor(pb("output", i).string()));
    // Shapes, axes and sizes that a case passes as inputs are fixed at import where kiln
    // needs them then: every integer input, every one of one element (OneHot's float
    // depth), and every 1-D float input after the first (Resize's scales and roi) becomes
    // a constant.
    std::optional<kiln::OnnxModel> imported;
    try {
      imported = kiln::import_onnx((dir / "model.onnx").string());
    } catch (const kiln::Error& e) {
      if (std::string(e.what()).find("must be known when the model is imported") ==
          std::string::npos)
        throw;
      kiln::OnnxImportOptions options;
      std::vector<kiln::Tensor> rest;
      for (std::size_t i = 0;
           i < inputs.size() && i < static_cast<std::size_t>(model.graph().input_size()); ++i) {
        if (kiln::is_integer(inputs[i].dtype()) || inputs[i].num_elements() == 1 ||
            (i > 0 && inputs[i].rank() == 1))
          options.constant_inputs.emplace(model.graph().input(static_cast<int>(i)).name(),
                                          inputs[i]);
        else
          rest.push_back(inputs[i]);
      }
      imported = kiln::import_onnx((dir / "model.onnx").string(), options);
      inputs = rest;
      out.fixed_inputs = true;
    }
    const kiln::OnnxModel& m = *imported;
    const auto check = [&](const char* how, const std::vector<kiln::Tensor>& got) {
      if (got.size() != expected.size())
        return std::string(how) + ": " + std::to_string(got.size()) + " outputs, expected " +
               std::to_string(expected.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        if (std::string d = compare(got[i], expected[i]); !d.empty())
          return std::string(how) + ": output " + std::to_string(i) + " (" + m.output_names[i] +
                 "): " + d;
      return std::string();
    };
    out.failure = check("reference", kiln::reference_run(m.graph.graph(), inputs, m.weights));
    if (out.failure.empty()) {
      kiln::CompiledCallable call(m.graph, m.weights);
      out.failure = check("compiled", call.run(inputs));
    }
  } catch (const kiln::Error& e) {
    out.failure = e.what();
    out.not_in_kiln = is_missing_type(out.failure);
  }
  std::replace(out.failure.begin(), out.failure.end(), '\n', ' ');
  return out;
}

std::map<std::string, std::string> read_known(const std::string& path) {
  std::map<std::string, std::string> known;
  std::ifstream in(path);
  if (!in) throw kiln::UserError(path + ": cannot be read");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.find_first_of(" \t");
    known[line.substr(0, space)] =
        space == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", space));
  }
  return known;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: kiln_onnx_node_tests DATA_DIR KNOWN_FAILURES [--table] [--filter TEXT] "
                 "[--verbose]\n";
    return 2;
  }
  const fs::path root = argv[1];
  bool table = false, verbose = false;
  std::string filter;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--table")
      table = true;
    else if (a == "--verbose")
      verbose = true;
    else if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  try {
    const std::map<std::string, std::string> known = read_known(argv[2]);
    const std::vector<std::string> ops = kiln::onnx_supported_ops();
    const std::set<std::string> supported(ops.begin(), ops.end());
    std::vector<fs::path> cases;
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory() && entry.path().filename().string().rfind("test_", 0) == 0 &&
          entry.path().filename().string().find(filter) != std::string::npos)
        cases.push_back(entry.path());
    std::sort(cases.begin(), cases.end());
    if (cases.empty()) {
      std::cerr << "no test_* cases under " << root << "\n";
      return 1;
    }
    struct Row {
      int cases = 0, passed = 0, fixed = 0, no_type = 0, known = 0, failed = 0;
    };
    std::map<std::string, Row> rows;
    int unexpected = 0, in_scope = 0, old_opset = 0;
    for (const fs::path& dir : cases) {
      const std::string name = dir.filename().string();
      const Outcome o = run_case(dir, supported);
      if (!o.in_scope && o.failure.empty()) continue;
      if (o.old_opset) {
        ++old_opset;
        continue;
      }
      ++in_scope;
      Row& row = rows[o.op];
      ++row.cases;
      const auto k = known.find(name);
      if (o.not_in_kiln) {
        ++row.no_type;
        if (verbose) std::cout << "no such dtype in kiln " << name << ": " << o.failure << "\n";
      } else if (o.failure.empty()) {
        ++row.passed;
        row.fixed += o.fixed_inputs ? 1 : 0;
        if (k != known.end()) {
          ++unexpected;
          std::cout << "UNEXPECTED PASS " << name << ": listed in known_failures.txt (" << k->second
                    << "); remove it there\n";
        } else if (verbose) {
          std::cout << "pass " << name
                    << (o.fixed_inputs ? " (integer and scalar inputs fixed)" : "") << "\n";
        }
      } else if (k != known.end()) {
        ++row.known;
        if (verbose) std::cout << "known " << name << ": " << o.failure << "\n";
      } else {
        ++row.failed;
        ++unexpected;
        std::cout << "FAIL " << name << ": " << o.failure << "\n";
      }
    }
    if (table) {
      std::cout
          << "\n| ONNX op | cases | pass | of which integer and scalar inputs fixed at import | "
             "dtype kiln lacks | known failures | failures |\n"
             "|---|---|---|---|---|---|---|\n";
      const auto print = [](const std::string& op, const Row& r) {
        std::cout << "| " << op << " | " << r.cases << " | " << r.passed << " | " << r.fixed
                  << " | " << r.no_type << " | " << r.known << " | " << r.failed << " |\n";
      };
      Row total;
      for (const auto& [op, r] : rows) {
        print(op, r);
        total.cases += r.cases;
        total.passed += r.passed;
        total.fixed += r.fixed;
        total.no_type += r.no_type;
        total.known += r.known;
        total.failed += r.failed;
      }
      print("**all " + std::to_string(rows.size()) + " ops**", total);
      std::cout << "\n"
                << old_opset << " more cases of these ops use opsets below " << kiln::kOnnxMinOpset
                << " at which kiln does not read them\n";
    }
    std::cout << in_scope << " cases of supported ops, " << unexpected << " unexpected results\n";
    return unexpected == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln_onnx_node_tests: " << e.what() << "\n";
    return 1;
  }
}
