#include "core/tokenizer/assistant_spans.h"

#include <algorithm>

namespace ptrain::tokenizer {
namespace {

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

size_t common_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// The output the template's loop wrote while it visited `identity`: the
// longest visit, so that a loop that only inspects messages (Qwen3's reverse
// scan for the last user query) does not count.
const jinja::RenderTrace::Visit* turn_of(const jinja::RenderTrace& trace, const void* identity) {
  const jinja::RenderTrace::Visit* best = nullptr;
  for (const auto& visit : trace.visits) {
    if (visit.item != identity || visit.end <= visit.begin) continue;
    if (!best || visit.end - visit.begin > best->end - best->begin) best = &visit;
  }
  return best;
}

}  // namespace

std::vector<TextSpan> assistant_spans(const std::string& rendered, const jinja::RenderTrace& trace,
                                      bool has_generation_blocks, const std::vector<jinja::Value>& messages,
                                      const std::function<std::string(size_t)>& render_prompt) {
  std::vector<TextSpan> spans;
  if (has_generation_blocks) {
    for (const auto& [begin, end] : trace.generation_spans) {
      if (end > begin) spans.push_back({begin, end});
    }
  } else {
    for (size_t k = 0; k < messages.size(); ++k) {
      if (messages[k].get("role").str() != "assistant") continue;
      const jinja::RenderTrace::Visit* turn = turn_of(trace, messages[k].identity());
      if (!turn) continue;  // the template wrote nothing for this message
      const size_t begin = std::max(turn->begin, common_prefix(rendered, render_prompt(k)));
      size_t end = turn->end;
      while (end > begin && is_ascii_space(rendered[end - 1])) --end;
      if (end > begin) spans.push_back({begin, end});
    }
  }
  std::sort(spans.begin(), spans.end(), [](const TextSpan& a, const TextSpan& b) { return a.begin < b.begin; });
  std::vector<TextSpan> merged;
  for (const TextSpan& span : spans) {
    if (!merged.empty() && span.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, span.end);
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

}  // namespace ptrain::tokenizer
