// Python's str operations on UTF-8 text, by code point as Python counts:
// strip with or without characters, split, replace, length and slicing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::jinja::text {

std::vector<uint32_t> code_points(const std::string& utf8);
std::string to_utf8(const std::vector<uint32_t>& code_points);
int64_t length(const std::string& utf8);

// Python's str.isspace() for one code point.
bool is_space(uint32_t code_point);

enum class Side { kBoth, kLeft, kRight };
// str.strip()/lstrip()/rstrip(): whitespace when `chars` is null, else any of its code points.
std::string strip(const std::string& text, const std::string* chars, Side side);

// str.split(sep, maxsplit): on whitespace runs when `sep` is null; maxsplit < 0 splits everywhere.
// An empty `sep` is Python's ValueError; callers refuse it first.
std::vector<std::string> split(const std::string& text, const std::string* sep, int64_t maxsplit);

// str.replace(old, new, count): count < 0 replaces all.
std::string replace(const std::string& text, const std::string& old, const std::string& replacement, int64_t count);

// ASCII case mapping (chat templates apply it to role names and keywords).
std::string upper(std::string text);
std::string lower(std::string text);
std::string capitalize(const std::string& text);
std::string title(const std::string& text);

}  // namespace ptrain::jinja::text
