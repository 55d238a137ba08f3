#include "common.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <set>
#include <sstream>

#include "kiln/core/file.hpp"
#include "kiln/io/npy.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/onnx/import.hpp"

namespace kiln::cli {
namespace {

std::string str(const auto&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

/// `NAME=VALUE` split at the first '='; no '=': name empty.
std::pair<std::string, std::string> split_assignment(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::optional<std::int64_t> parse_int(const std::string& text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

/// Argument index of the argument named \p name, or of `argN` or `N`, if in range.
std::optional<std::size_t> argument_index(const ir::Graph& entry, const std::string& name) {
  const std::size_t count = entry.arguments().size();
  for (std::size_t i = 0; i < count; ++i)
    if (entry.argument_name(i) == name) return i;
  const std::string digits = name.rfind("arg", 0) == 0 ? name.substr(3) : name;
  const std::optional<std::int64_t> i = parse_int(digits);
  if (!i || static_cast<std::size_t>(*i) >= count) return std::nullopt;
  return static_cast<std::size_t>(*i);
}

/// What `--input` calls argument \p i: its name (an ONNX input's), else `argN`.
std::string argument_label(const ir::Graph& entry, std::size_t i) {
  return entry.argument_name(i).empty() ? "arg" + std::to_string(i) : entry.argument_name(i);
}

std::string argument_list(const ir::Graph& entry) {
  std::string out;
  for (std::size_t i = 0; i < entry.arguments().size(); ++i)
    out += str(i ? ", " : "", argument_label(entry, i), " (",
               ir::to_string(entry.type(entry.arguments()[i])), ")");
  return out.empty() ? "no arguments" : out;
}

}  // namespace

std::vector<CommandFile> read_files(const ModelOptions& options) {
  std::vector<CommandFile> out = {{"the model", options.model}};
  if (!options.weights.empty()) out.push_back({"--weights", options.weights});
  for (const std::string& spec : options.inputs)
    out.push_back({"--input " + spec, split_assignment(spec).second});
  return out;
}

void check_files_distinct(const std::vector<CommandFile>& files) {
  namespace fs = std::filesystem;
  const auto identity = [](const std::string& path) {
    std::error_code error;
    fs::path p = fs::weakly_canonical(path, error);  // resolves the links of what exists
    return error ? fs::absolute(path).lexically_normal() : p;
  };
  const auto same = [&](const std::string& a, const std::string& b) {
    std::error_code error;
    return identity(a) == identity(b) || fs::equivalent(a, b, error);  // hard links too
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!files[i].written) continue;
    std::error_code error;
    if (fs::is_directory(files[i].path, error))
      throw UsageError(
          str(files[i].what, ": ", files[i].path, " is a directory; kiln writes a file there"));
    for (std::size_t j = 0; j < files.size(); ++j)
      if (j != i && (j > i || !files[j].written) && same(files[i].path, files[j].path))
        throw UsageError(str(files[i].what, " writes ", files[i].path, ", which is ",
                             files[j].written ? "also written by " : "read as ", files[j].what,
                             files[j].path != files[i].path ? " (" + files[j].path + ")" : "",
                             ": one would destroy the other; give another path"));
  }
}

bool is_onnx_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".onnx";
}

LoadedModel load_model(const std::string& path) {
  if (is_onnx_path(path)) {
    Progress progress("importing " + path);
    OnnxModel imported = import_onnx(path);
    return {imported.graph.graph(), std::move(imported.weights)};
  }
  return {load_module(path), {}};
}

std::map<std::string, std::int64_t> parse_dims(const std::vector<std::string>& specs) {
  std::map<std::string, std::int64_t> sizes;
  for (const std::string& spec : specs) {
    const auto [name, value] = split_assignment(spec);
    const std::optional<std::int64_t> size = parse_int(value);
    if (name.empty() || !size)
      throw UsageError(str("--dim '", spec, "': expected NAME=SIZE with SIZE >= 0 (e.g. batch=4)"));
    sizes[name] = *size;
  }
  return sizes;
}

LoadedModel load_model_for_call(const ModelOptions& options) {
  if (!is_onnx_path(options.model)) return load_model(options.model);
  OnnxImportOptions import;
  import.dims = parse_dims(options.dims);
  // The files' shapes give the sizes of the dims --dim leaves open; a file that does not
  // fit its input is reported by bind_inputs, against the imported module.
  const std::vector<OnnxInput> inputs = onnx_inputs(options.model);
  std::vector<bool> given(inputs.size(), false);
  std::size_t next = 0;
  for (const std::string& spec : options.inputs) {
    const auto [name, file] = split_assignment(spec);
    std::optional<std::size_t> index;
    for (std::size_t i = 0; i < inputs.size() && !name.empty(); ++i)
      if (inputs[i].name == name) index = i;
    if (!name.empty() && !index) {
      const std::optional<std::int64_t> i =
          parse_int(name.rfind("arg", 0) == 0 ? name.substr(3) : name);
      if (i && *i >= 0 && static_cast<std::size_t>(*i) < inputs.size())
        index = static_cast<std::size_t>(*i);
    }
    if (name.empty()) {
      while (next < inputs.size() && given[next]) ++next;
      if (next < inputs.size()) index = next;
    }
    if (!index || given[*index]) continue;
    given[*index] = true;
    const Tensor t = load_npy(file);
    const Shape& want = inputs[*index].layout.shape;
    if (t.rank() != want.rank()) continue;
    for (std::size_t d = 0; d < t.rank(); ++d)
      if (want.dims()[d].is_name())
        import.dims.emplace(want.dims()[d].symbol(), t.shape().dims()[d].size());
  }
  Progress progress("importing " + options.model);
  OnnxModel imported = import_onnx(options.model, import);
  return {imported.graph.graph(), std::move(imported.weights), true};
}

ir::Module load_module(const std::string& path) {
  const std::string text = read_regular_file(path, "a model", kMaxTensorBytes);
  ir::Module module = ir::parse_module(text, path);  // ParseError: path:line:col: ...
  try {
    ir::verify_or_throw(module);
  } catch (const UserError& e) {
    throw UserError(str(path, ": the module does not verify: ", e.what()));
  }
  return module;
}

/// \p t with its data on \p device (CPU devices share memory: the bytes are copied as is).
static Tensor on_device(const Tensor& t, Device device) {
  if (t.device() == device || device.is_cuda()) return t;
  return Tensor::from_bytes(t.dtype(), t.shape(), device, t.bytes().data(), t.bytes().size());
}

std::vector<Tensor> bind_inputs(const ir::Module& module, const ModelOptions& options,
                                bool generate, std::vector<bool>* generated) {
  const ir::Graph& entry = module.entry();
  const std::size_t n = entry.arguments().size();
  std::map<std::string, std::pair<std::int64_t, std::string>> sizes;  // dim -> size, source
  for (const auto& [name, size] : parse_dims(options.dims))
    sizes[name] = {size, str("--dim ", name, "=", size)};
  std::set<std::string> symbols;  // the entry's symbolic dims, for checking --dim's names
  for (const ir::Value v : entry.arguments())
    for (const Dim& d : entry.type(v).shape.dims())
      if (d.is_name()) symbols.insert(d.symbol());
  for (const auto& [name, size] : sizes)
    if (symbols.count(name) == 0)
      throw UsageError(str(size.second, ": @", entry.name(), " has no dim named '", name, "'; ",
                           symbols.empty() ? std::string("its arguments have no symbolic dims")
                                           : "its symbolic dims are " + join(symbols)));

  std::vector<Tensor> inputs(n);
  std::vector<std::string> files(n);
  std::size_t next = 0;
  for (const std::string& spec : options.inputs) {
    auto [name, file] = split_assignment(spec);
    std::size_t index = 0;
    if (name.empty()) {
      while (next < n && !files[next].empty()) ++next;
      if (next == n)
        throw UsageError(str("--input '", spec, "': more inputs than arguments; @", entry.name(),
                             " takes ", argument_list(entry)));
      index = next;
    } else if (const std::optional<std::size_t> i = argument_index(entry, name)) {
      index = *i;
    } else {
      throw UsageError(str("--input '", spec, "': no argument named '", name, "'; @", entry.name(),
                           " takes ", argument_list(entry),
                           " (name them so, or argN or N, or list files in order)"));
    }
    if (!files[index].empty())
      throw UsageError(
          str("--input '", spec, "': arg", index, " is already given by '", files[index], "'"));
    files[index] = file;
    // Files have no device: the data goes where the argument lives.
    inputs[index] = on_device(load_npy(file), entry.type(entry.arguments()[index]).device);
  }

  // Check what the files hold against the arguments; learn symbolic sizes.
  for (std::size_t i = 0; i < n; ++i) {
    if (files[i].empty()) continue;
    const ir::TensorType& want = entry.type(entry.arguments()[i]);
    const Tensor& t = inputs[i];
    const std::string what = str(files[i], " (for ", argument_label(entry, i), " of @",
                                 entry.name(), ", ", ir::to_string(want), ")");
    if (t.dtype() != want.dtype || t.rank() != want.shape.rank())
      throw UserError(str(what, ": holds ", t.dtype(), t.shape(), "; it needs ", want.dtype,
                          " of rank ", want.shape.rank()));
    for (std::size_t d = 0; d < t.rank(); ++d) {
      const std::int64_t size = t.shape().dims()[d].size();
      const Dim& w = want.shape.dims()[d];
      if (w.is_static() && w.size() != size)
        throw UserError(
            str(what, ": has ", size, " at axis ", d, " where the model has ", w.size()));
      if (w.is_name()) {
        auto [it, fresh] = sizes.emplace(w.symbol(), std::make_pair(size, files[i]));
        if (!fresh && it->second.first != size)
          throw UserError(str(what, ": dim '", w.symbol(), "' is ", size, " at axis ", d, " but ",
                              it->second.first, " in ", it->second.second));
      }
    }
  }

  std::vector<std::string> missing;
  for (std::size_t i = 0; i < n; ++i) {
    if (!files[i].empty()) continue;
    const ir::TensorType& want = entry.type(entry.arguments()[i]);
    if (!generate) {
      missing.push_back(str(argument_label(entry, i), " (", ir::to_string(want), ")"));
      continue;
    }
    std::vector<Dim> dims;
    for (const Dim& d : want.shape.dims()) {
      if (d.is_static()) {
        dims.emplace_back(d.size());
      } else {
        auto it = sizes.find(d.symbol());
        dims.emplace_back(it != sizes.end() ? it->second.first : 1);
      }
    }
    const TensorLayout layout(want.dtype, Shape(std::move(dims)));
    try {
      inputs[i] = is_floating(want.dtype) ? Tensor::random(layout, i + 1, -1, 1)
                                          : Tensor::random(layout, i + 1, 0, 2);
    } catch (const UserError& e) {  // too big for kiln or for memory
      throw UserError(str(argument_label(entry, i), " of @", entry.name(), ": a random ", layout,
                          " does not fit in memory (", e.what(),
                          "); give smaller sizes with --dim"));
    }
  }
  if (generated != nullptr) {
    generated->assign(n, false);
    for (std::size_t i = 0; i < n; ++i) (*generated)[i] = files[i].empty();
  }
  if (!missing.empty())
    throw UserError(str(options.model, ": missing input", missing.size() > 1 ? "s " : " ",
                        join(missing), "; pass --input NAME=FILE.npy (or argN=FILE.npy) for each"));
  return inputs;
}

std::map<std::string, Tensor> load_weights(const ir::Module& module, const ModelOptions& options,
                                           bool fill_missing,
                                           std::map<std::string, Tensor> embedded) {
  if (!embedded.empty() && !options.weights.empty())
    throw UsageError(str("--weights ", options.weights, ": ", options.model,
                         " carries its weights (its initializers); drop --weights"));
  if (!embedded.empty()) return embedded;
  std::map<std::string, Tensor> weights;
  if (!options.weights.empty()) weights = SafetensorsFile::open(options.weights).tensors();
  const std::map<std::string, ir::TensorType> needed = module_weights(module);
  std::vector<std::string> unused, problems;  // every problem at once, naming the file
  for (const auto& [name, t] : weights)
    if (needed.count(name) == 0) unused.push_back(name);
  for (const auto& [name, type] : needed) {
    const auto it = weights.find(name);
    if (it == weights.end()) {
      if (!options.weights.empty() && !fill_missing)
        problems.push_back(str("the model reads ", quote_name(name), " (", ir::to_string(type),
                               "), which the file lacks"));
    } else if (it->second.dtype() != type.dtype || it->second.shape() != type.shape) {
      problems.push_back(str(quote_name(name), " is ", kiln::name(it->second.dtype()),
                             it->second.shape(), " in the file but the model reads ",
                             ir::to_string(type)));
    }
  }
  if (!unused.empty() && !options.skip_unused_weights)
    problems.push_back(str(unused.size(), " tensor", unused.size() == 1 ? "" : "s",
                           " the model does not read (first: ", quote_name(unused[0]),
                           "); pass --skip-unused-weights to leave ",
                           unused.size() == 1 ? "it" : "them",
                           " out, if the file is for this "
                           "model"));
  if (!problems.empty()) {
    if (problems.size() > 10) {
      const std::size_t more = problems.size() - 9;
      problems.resize(9);
      problems.push_back(str("and ", more, " more"));
    }
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    throw UserError(str(options.weights, ": ", all));
  }
  for (const std::string& name : unused) weights.erase(name);
  if (!unused.empty())
    std::fprintf(stderr, "kiln: skipped %zu weight%s of %s that the model does not read\n",
                 unused.size(), unused.size() == 1 ? "" : "s", options.weights.c_str());
  for (auto& [name, t] : weights)  // safetensors have no device: each goes where it is read
    if (auto it = needed.find(name); it != needed.end()) t = on_device(t, it->second.device);
  if (fill_missing) {
    for (const auto& [name, type] : needed)
      if (weights.count(name) == 0)
        weights.emplace(name, Tensor::zeros(TensorLayout(type.dtype, type.shape, type.device)));
  } else if (options.weights.empty() && !needed.empty()) {
    throw UserError(str(options.model, ": the model reads ", needed.size(), " weight",
                        needed.size() == 1 ? "" : "s", " (first: '", needed.begin()->first,
                        "'); pass --weights FILE.safetensors"));
  }
  return weights;
}

CompileOptions compile_options(const ModelOptions& options) {
  CompileOptions out;
  out.context = std::make_shared<DeviceContext>(
      Device::parse(options.device), DeviceContextOptions{.num_threads = options.threads});
  if (options.passes) out.passes = *options.passes;
  if (options.matmul_precision == "bf16") out.matmul_precision = MatmulPrecision::bf16;
  out.winograd_convs = !options.no_winograd;
  // Started by mpirun: each process runs the work of its own device (cpu:<rank>).
  if (launched_by_mpi()) out.cluster = mpi_cluster();
  return out;
}

// ---- progress -----------------------------------------------------------------------------

Progress::Progress(std::string what)
    : what_(std::move(what)),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { watch(); }) {}

Progress::~Progress() { done(); }

void Progress::done() {
  {
    std::scoped_lock lock(mutex_);
    if (finished_) return;
    finished_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (shown_) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (isatty(STDERR_FILENO)) {
      std::fprintf(stderr, "\r\033[Kkiln: %s done in %.1f s\n", what_.c_str(), s);
    } else {
      std::fprintf(stderr, " done in %.1f s\n", s);
    }
  }
}

void Progress::watch() {
  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::unique_lock lock(mutex_);
  for (int seconds = 1;; ++seconds) {
    if (cv_.wait_until(lock, start_ + std::chrono::seconds(seconds), [&] { return finished_; }))
      return;
    if (terminal) {
      std::fprintf(stderr, "\r\033[Kkiln: %s... %d s", what_.c_str(), seconds);
    } else if (!shown_) {
      std::fprintf(stderr, "kiln: %s...", what_.c_str());
    }
    std::fflush(stderr);
    shown_ = true;
  }
}

// ---- numbers ------------------------------------------------------------------------------

Timing summarize(std::vector<double> ms) {
  Timing t;
  if (ms.empty()) return t;
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) {
    return ms[std::min(ms.size() - 1,
                       static_cast<std::size_t>(q * static_cast<double>(ms.size())))];
  };
  t.samples = ms.size();
  t.min = ms.front();
  t.median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  t.p90 = at(0.90);
  t.p99 = at(0.99);
  double sum = 0;
  for (double v : ms) sum += v;
  t.mean = sum / static_cast<double>(ms.size());
  return t;
}

std::string format_ms(double ms) {
  char buf[32];
  if (ms >= 1000) {
    std::snprintf(buf, sizeof buf, "%.2f s", ms / 1000);
  } else if (ms >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f us", ms * 1000);
  }
  return buf;
}

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  }
  return buf;
}

double max_abs_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const std::vector<double> x = a[i].to_doubles(), y = b[i].to_doubles();
    if (x.size() != y.size()) return INFINITY;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double d = std::fabs(x[k] - y[k]);
      if (!(d <= worst)) worst = d;  // NaN wins
    }
  }
  return worst;
}

std::string describe_values(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  std::ostringstream os;
  os << t.dtype() << t.shape() << " = [";
  for (std::size_t i = 0; i < std::min<std::size_t>(v.size(), 6); ++i)
    os << (i ? ", " : "") << v[i];
  if (v.size() > 6) os << ", ...";
  os << "]";
  if (!v.empty()) {
    double lo = v[0], hi = v[0], sum = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
    os << " (min " << lo << ", max " << hi << ", mean " << sum / static_cast<double>(v.size())
       << ")";
  }
  return os.str();
}

}  // namespace kiln::cli
