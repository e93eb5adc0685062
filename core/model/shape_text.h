// A tensor shape as error messages print it: "[2, 3]".
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <sstream>
#include <string>

namespace ptrain::model {

inline std::string shape_text(c10::IntArrayRef shape) {
  std::ostringstream out;
  out << shape;
  return out.str();
}

}  // namespace ptrain::model
