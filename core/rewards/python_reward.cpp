#include "core/rewards/python_reward.h"

#include "core/log/logger.h"
#include "core/rewards/reward_batch.h"
#include "ptrain/sdk/errors.h"

#include <pybind11/embed.h>

#include <filesystem>
#include <map>
#include <mutex>

namespace py = pybind11;
namespace fs = std::filesystem;

namespace ptrain::rewards {
namespace {

// The process's one interpreter, started on first use and never finalised:
// CPython cannot be restarted reliably and extension modules (numpy) do not
// survive finalisation. Python's signal handlers stay off, so Ctrl-C keeps
// reaching ptrain's own stop handling. Between calls no thread holds the GIL.
void ensure_interpreter() {
  static std::once_flag started;
  std::call_once(started, [] {
    py::initialize_interpreter(/*init_signal_handlers=*/false, 0, nullptr, /*add_program_dir_to_path=*/false);
    PyEval_SaveThread();
  });
}

// The exception as Python prints it, traceback included. GIL held. An
// exception raised by the call itself (a keyword argument the function does
// not take) has no traceback: None, not a null handle, which pybind11 could
// not pass.
std::string python_traceback(py::error_already_set& error) {
  const auto or_none = [](const py::object& part) { return part ? part : py::object(py::none()); };
  try {
    const py::list lines =
        py::module_::import("traceback")
            .attr("format_exception")(or_none(error.type()), or_none(error.value()), or_none(error.trace()));
    std::string text;
    for (const py::handle line : lines) text += line.cast<std::string>();
    return text;
  } catch (const std::exception&) {  // error_already_set, or pybind11's cast_error
    return error.what();
  }
}

// Whether `function` takes **kwargs, as reward functions are called with
// every dataset field; true where Python cannot tell (some builtins). GIL held.
bool takes_keyword_arguments(const py::object& function) {
  const py::module_ inspect = py::module_::import("inspect");
  py::object signature;
  try {
    signature = inspect.attr("signature")(function);
  } catch (py::error_already_set&) {
    return true;
  }
  const py::object var_keyword = inspect.attr("Parameter").attr("VAR_KEYWORD");
  for (const py::handle parameter : signature.attr("parameters").attr("values")()) {
    if (py::object(parameter.attr("kind")).equal(var_keyword)) return true;
  }
  return false;
}

// One score per item of `result` (a list, tuple, numpy array: any iterable of
// numbers). GIL held.
std::vector<double> scores_of(const py::object& result, const std::string& label) {
  if (!py::isinstance<py::iterable>(result) || py::isinstance<py::str>(result)) {
    throw sdk::PluginError("reward function " + label + " returned a " + std::string(Py_TYPE(result.ptr())->tp_name) +
                           "; expected a list of numbers");
  }
  std::vector<double> scores;
  for (const py::handle item : result) {
    const double value = PyFloat_AsDouble(item.ptr());
    if (value == -1.0 && PyErr_Occurred() != nullptr) {
      PyErr_Clear();
      throw sdk::PluginError("reward function " + label + " returned " + py::repr(item).cast<std::string>() +
                             " for completion #" + std::to_string(scores.size() + 1) + "; expected a number");
    }
    scores.push_back(value);
  }
  return scores;
}

class PythonRewardFunction final : public sdk::RewardFunction {
 public:
  PythonRewardFunction(py::object function, std::string name, std::string file)
      : function_(std::move(function)), name_(std::move(name)), label_("'" + name_ + "' of " + file) {}
  ~PythonRewardFunction() override {
    py::gil_scoped_acquire gil;
    function_ = py::object();
  }

  std::string name() const override { return name_; }

  std::vector<double> score(const std::vector<sdk::RewardInput>& inputs) override {
    const std::string batch = reward_batch_text(inputs);  // built before taking the GIL
    std::vector<double> scores;
    {
      py::gil_scoped_acquire gil;
      try {
        const py::dict arguments = py::module_::import("json").attr("loads")(batch);
        scores = scores_of(function_(**arguments), label_);
      } catch (py::error_already_set& error) {
        throw sdk::PluginError("reward function " + label_ + " raised an exception:\n" + python_traceback(error));
      } catch (const sdk::Error&) {
        throw;                                 // scores_of's, which name the function
      } catch (const std::exception& error) {  // pybind11's own (a cast_error), never a bare message
        throw sdk::PluginError("reward function " + label_ + " could not be called: " + error.what());
      }
    }
    check_reward_scores(label_, scores, inputs);
    return scores;
  }

 private:
  py::object function_;
  std::string name_;
  std::string label_;  // 'name' of /path/file.py, for errors
};

class PythonRewardFile final : public sdk::RewardLibrary {
 public:
  PythonRewardFile(py::module_ module, fs::path path) : module_(std::move(module)), path_(std::move(path)) {}
  ~PythonRewardFile() override {
    py::gil_scoped_acquire gil;
    module_ = py::module_();
  }

  std::string name() const override { return path_.stem().string(); }
  std::string path() const override { return path_.string(); }

  // Public callables whose __module__ is this file (not those it imported).
  std::vector<std::string> function_names() const override {
    py::gil_scoped_acquire gil;
    const py::object module_name = module_.attr("__name__");
    std::vector<std::string> names;
    for (const auto item : module_.attr("__dict__").cast<py::dict>()) {
      const std::string name = item.first.cast<std::string>();
      const py::handle value = item.second;
      if (name.empty() || name[0] == '_' || !PyCallable_Check(value.ptr())) continue;
      if (!py::hasattr(value, "__module__")) continue;
      const py::object owner = value.attr("__module__");
      if (!owner.equal(module_name)) continue;
      names.push_back(name);
    }
    return names;
  }

  std::unique_ptr<sdk::RewardFunction> create(const std::string& function_name) const override {
    std::vector<std::string> defined;
    {
      py::gil_scoped_acquire gil;
      if (py::hasattr(module_, function_name.c_str())) {
        py::object function = module_.attr(function_name.c_str());
        if (!PyCallable_Check(function.ptr())) {
          throw sdk::ConfigError(path() + ": '" + function_name + "' is a " +
                                 std::string(Py_TYPE(function.ptr())->tp_name) + ", not a function");
        }
        if (!takes_keyword_arguments(function)) {
          throw sdk::ConfigError(path() + ": reward function '" + function_name +
                                 "' takes no **kwargs, but is called with the keyword arguments prompts, "
                                 "completions, completion_tokens, truncated and every field of the dataset lines; "
                                 "end its parameter list with **kwargs");
        }
        return std::make_unique<PythonRewardFunction>(std::move(function), function_name, path());
      }
    }
    std::string offered;
    for (const std::string& name : function_names()) offered += (offered.empty() ? "" : ", ") + name;
    throw sdk::ConfigError(path() + ": defines no function '" + function_name + "'; it defines " +
                           (offered.empty() ? "none" : offered));
  }

 private:
  py::module_ module_;
  fs::path path_;
};

// Runs the file as module ptrain_reward_<stem> (registered in sys.modules,
// as dataclasses and pickle expect). GIL held.
py::module_ import_file(const fs::path& path) {
  const py::module_ sys = py::module_::import("sys");
  const std::string directory = path.parent_path().string();
  if (!sys.attr("path").contains(directory)) sys.attr("path").attr("insert")(0, directory);
  const py::module_ util = py::module_::import("importlib.util");
  // Two files of one stem (a/rewards.py, b/rewards.py) get two names.
  std::string module_name = "ptrain_reward_" + path.stem().string();
  for (int suffix = 2; sys.attr("modules").contains(module_name); ++suffix) {
    module_name = "ptrain_reward_" + path.stem().string() + "_" + std::to_string(suffix);
  }
  const py::object spec = util.attr("spec_from_file_location")(module_name, path.string());
  py::module_ module = util.attr("module_from_spec")(spec);
  sys.attr("modules")[module_name.c_str()] = module;
  try {
    spec.attr("loader").attr("exec_module")(module);
  } catch (py::error_already_set&) {
    sys.attr("modules").attr("pop")(module_name, py::none());
    throw;
  }
  return module;
}

}  // namespace

std::unique_ptr<sdk::RewardLibrary> open_python_reward_file(const std::string& file) {
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    throw sdk::ConfigError("python reward file '" + file +
                           "': " + (fs::exists(file, error) ? "not a regular file" : "no such file"));
  }
  const fs::path path = fs::canonical(file);
  if (path.extension() != ".py") {
    throw sdk::ConfigError("python reward file '" + file + "': expected a Python source file ending in .py");
  }
  ensure_interpreter();
  // One import per file and process: two reward functions of one file share
  // its module (and its globals), as they would in a Python trainer.
  // The modules are never destroyed: a static's destructor would drop them
  // at exit without the GIL.
  static std::map<fs::path, py::module_*> imported;
  py::gil_scoped_acquire gil;
  auto found = imported.find(path);
  if (found == imported.end()) {
    try {
      found = imported.emplace(path, new py::module_(import_file(path))).first;  // kept for the process
    } catch (py::error_already_set& exception) {
      throw sdk::ConfigError("python reward file '" + file + "': importing it raised an exception:\n" +
                             python_traceback(exception));
    }
    log::info("rewards", "imported python reward file " + path.string());
  }
  return std::make_unique<PythonRewardFile>(*found->second, path);
}

}  // namespace ptrain::rewards
