#include "core/jinja/text.h"

#include <algorithm>
#include <cctype>

namespace ptrain::jinja::text {

std::vector<uint32_t> code_points(const std::string& utf8) {
  std::vector<uint32_t> out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size();) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    const int width = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    uint32_t code = width == 1 ? lead : width == 2 ? (lead & 0x1F) : width == 3 ? (lead & 0x0F) : (lead & 0x07);
    for (int k = 1; k < width && i + k < utf8.size(); ++k) code = (code << 6) | (utf8[i + k] & 0x3F);
    out.push_back(code);
    i += width;
  }
  return out;
}

std::string to_utf8(const std::vector<uint32_t>& code_points) {
  std::string out;
  for (const uint32_t c : code_points) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

int64_t length(const std::string& utf8) {
  return std::count_if(utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(const std::string& text, const std::string* chars, Side side) {
  const std::vector<uint32_t> points = code_points(text);
  const std::vector<uint32_t> set = chars ? code_points(*chars) : std::vector<uint32_t>{};
  const auto strips = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c);
  };
  size_t begin = 0, end = points.size();
  if (side != Side::kRight) {
    while (begin < end && strips(points[begin])) ++begin;
  }
  if (side != Side::kLeft) {
    while (end > begin && strips(points[end - 1])) --end;
  }
  return to_utf8(std::vector<uint32_t>(points.begin() + begin, points.begin() + end));
}

std::vector<std::string> split(const std::string& text, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    for (;;) {
      const size_t found =
          (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) ? text.find(*sep, start) : std::string::npos;
      if (found == std::string::npos) break;
      parts.push_back(text.substr(start, found - start));
      start = found + sep->size();
    }
    parts.push_back(text.substr(start));
    return parts;
  }
  const std::vector<uint32_t> points = code_points(text);
  size_t i = 0;
  while (i < points.size()) {
    while (i < points.size() && is_space(points[i])) ++i;
    if (i == points.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t end = points.size();
      while (end > i && is_space(points[end - 1])) --end;
      parts.push_back(to_utf8(std::vector<uint32_t>(points.begin() + i, points.begin() + end)));
      break;
    }
    const size_t start = i;
    while (i < points.size() && !is_space(points[i])) ++i;
    parts.push_back(to_utf8(std::vector<uint32_t>(points.begin() + start, points.begin() + i)));
  }
  return parts;
}

std::string replace(const std::string& text, const std::string& old, const std::string& replacement, int64_t count) {
  if (old.empty()) {  // Python inserts the replacement between code points
    const std::vector<uint32_t> points = code_points(text);
    std::string out;
    int64_t done = 0;
    for (size_t i = 0; i <= points.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < points.size()) out += to_utf8({points[i]});
    }
    return out;
  }
  std::string out;
  size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t found = text.find(old, start);
    if (found == std::string::npos) break;
    out += text.substr(start, found - start) + replacement;
    start = found + old.size();
  }
  return out + text.substr(start);
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string capitalize(const std::string& text) {
  std::string out = lower(text);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string title(const std::string& text) {
  std::string out = text;
  bool word_start = true;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    c = static_cast<char>(word_start ? std::toupper(u) : std::tolower(u));
    word_start = !std::isalnum(u);
  }
  return out;
}

}  // namespace ptrain::jinja::text
