#include "core/dist/launch_env.h"

#include "ptrain/sdk/errors.h"

#include <cstdlib>
#include <optional>
#include <sstream>
#include <vector>

namespace ptrain::dist {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int env_int(const char* name, std::optional<int> fallback, int min_value) {
  const std::optional<std::string> text = env(name);
  if (!text) {
    if (fallback) return *fallback;
    throw sdk::ConfigError(std::string("environment variable ") + name +
                           " is not set (needed for a multi-process run)");
  }
  try {
    size_t used = 0;
    const int value = std::stoi(*text, &used);
    if (used == text->size() && value >= min_value) return value;
  } catch (const std::exception&) {
  }
  throw sdk::ConfigError(std::string("environment variable ") + name + "='" + *text + "' is not an integer ≥ " +
                         std::to_string(min_value));
}

// A TCP port: 1..65535 (a larger number would wrap around to another port).
int env_port(const char* name, std::optional<int> fallback) {
  const int port = env_int(name, fallback, 1);
  if (port > kMaxPort) {
    throw sdk::ConfigError(std::string("environment variable ") + name + "=" + std::to_string(port) +
                           " is not a TCP port (1-" + std::to_string(kMaxPort) + ")");
  }
  return port;
}

void check_ranks(const LaunchEnv& launch) {
  if (launch.rank >= launch.world_size || launch.local_rank >= launch.local_world_size) {
    throw sdk::ConfigError("launch environment (" + launch.source + "): rank " + std::to_string(launch.rank) +
                           " / world size " + std::to_string(launch.world_size) + ", local rank " +
                           std::to_string(launch.local_rank) + " / local world size " +
                           std::to_string(launch.local_world_size) + " are inconsistent");
  }
}

// sbatch sets SLURM_JOB_NODELIST; older Slurm and some wrappers only
// SLURM_NODELIST. Returns the variable's name and value.
std::optional<std::pair<std::string, std::string>> slurm_node_list() {
  for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (auto nodes = env(name)) return std::make_pair(std::string(name), *nodes);
  }
  return std::nullopt;
}

// Brackets that open and close in turn, each holding a list of numbers and
// ranges ("node[03-05,9]"); hosts that are not empty.
bool well_formed_node_list(const std::string& node_list) {
  bool in_brackets = false;
  std::string bracketed;
  char previous = ',';
  for (const char c : node_list) {
    if (c == '[') {
      if (in_brackets || previous == ',') return false;
      in_brackets = true;
      bracketed.clear();
    } else if (c == ']') {
      if (!in_brackets || bracketed.empty() || bracketed.find_first_not_of("0123456789-,") != std::string::npos ||
          bracketed.front() == '-' || bracketed.front() == ',') {
        return false;
      }
      in_brackets = false;
    } else if (in_brackets) {
      bracketed.push_back(c);
    } else if (c == ',' && previous == ',') {
      return false;
    }
    previous = c;
  }
  return !in_brackets && !node_list.empty() && node_list.back() != ',';
}

}  // namespace

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id) {
  // Entries "COUNT" or "COUNT(xREPEAT)", comma-separated, one count per node in order.
  const sdk::ConfigError malformed("environment variable SLURM_TASKS_PER_NODE='" + tasks_per_node +
                                   "' is not Slurm's COUNT[(xREPEAT)],... form");
  std::vector<std::pair<int, int>> counts;  // (tasks, nodes with that many)
  std::istringstream entries(tasks_per_node);
  for (std::string entry; std::getline(entries, entry, ',');) {
    int count = 0, repeat = 1;
    char open = 0, x = 0, close = 0;
    std::istringstream fields(entry);
    if (!(fields >> count) || count < 1) throw malformed;
    if (fields >> open && !(open == '(' && fields >> x >> repeat >> close && x == 'x' && close == ')' && repeat >= 1)) {
      throw malformed;
    }
    if (fields >> close) throw malformed;  // anything after the entry
    counts.emplace_back(count, repeat);
  }
  if (counts.empty() || tasks_per_node.back() == ',') throw malformed;
  int first_node = 0;
  for (const auto& [count, repeat] : counts) {
    if (node_id - first_node < repeat) return count;
    first_node += repeat;
  }
  throw sdk::ConfigError("environment variable SLURM_NODEID=" + std::to_string(node_id) +
                         " names a node beyond SLURM_TASKS_PER_NODE='" + tasks_per_node + "'");
}

std::string first_slurm_host(const std::string& node_list, const std::string& variable) {
  if (!well_formed_node_list(node_list)) {
    throw sdk::ConfigError("environment variable " + variable + "='" + node_list +
                           "' is not a Slurm node list (host,host[01-04,7],...)");
  }
  // The first entry ends at a comma outside brackets.
  std::string first;
  int depth = 0;
  for (const char c : node_list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first.push_back(c);
  }
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  // "node[03-05,9]" → prefix "node" + the first number of the range list, padding kept.
  const std::string ranges = first.substr(open + 1);
  const size_t end = ranges.find_first_of("-,]");
  return first.substr(0, open) + ranges.substr(0, end);
}

LaunchEnv read_launch_env() {
  LaunchEnv launch;
  if (env("RANK")) {
    launch.source = "torchrun";
    launch.rank = env_int("RANK", std::nullopt, 0);
    launch.world_size = env_int("WORLD_SIZE", std::nullopt, 1);
    launch.local_rank = env_int("LOCAL_RANK", launch.rank, 0);
    launch.local_world_size = env_int("LOCAL_WORLD_SIZE", launch.world_size, 1);
    launch.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
    launch.master_port = env_port("MASTER_PORT", launch.world_size == 1 ? std::optional<int>(29500) : std::nullopt);
    if (env("TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True")) {
      launch.agent_store_prefix = "/worker/attempt_" + std::to_string(env_int("TORCHELASTIC_RESTART_COUNT", 0, 0));
    }
  } else if (env("SLURM_PROCID")) {
    launch.source = "slurm";
    launch.rank = env_int("SLURM_PROCID", std::nullopt, 0);
    launch.world_size = env_int("SLURM_NTASKS", std::nullopt, 1);
    launch.local_rank = env_int("SLURM_LOCALID", 0, 0);
    launch.local_world_size = env_int("SLURM_NTASKS_PER_NODE", 1, 1);
    if (const auto tasks_per_node = env("SLURM_TASKS_PER_NODE")) {
      launch.local_world_size = slurm_tasks_on_node(*tasks_per_node, env_int("SLURM_NODEID", 0, 0));
    }
    if (const auto addr = env("MASTER_ADDR")) {
      launch.master_addr = *addr;
    } else if (const auto nodes = slurm_node_list()) {
      launch.master_addr = first_slurm_host(nodes->second, nodes->first);
    } else if (launch.world_size > 1) {
      throw sdk::ConfigError("under Slurm, set MASTER_ADDR or SLURM_JOB_NODELIST to find the rendezvous host");
    }
    launch.master_port = env_port("MASTER_PORT", 29500);
  }
  check_ranks(launch);
  return launch;
}

}  // namespace ptrain::dist
