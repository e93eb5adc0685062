// The SDK's two versions.
//
// kAbiVersion (plugin.h) is what the loader checks: a plugin runs only in a
// ptrain whose ABI version equals the one it was compiled with. The semantic
// version tells people (and find_package(ptrain X.Y)) what changed:
//   MAJOR  rises with kAbiVersion — a class layout, a virtual function or an
//          inline function of a header under ptrain/sdk changed; every plugin
//          must be rebuilt against the new SDK (docs/plugins.md lists what
//          counts).
//   MINOR  additions that old plugins do not see: a new header, a new
//          non-inline helper in libptrain_sdk, a new config-schema feature.
//   PATCH  fixes that change no declaration.
// CMake reads these lines (cmake/ptrain_sdk_version.cmake); keep their shape.
#pragma once

#define PTRAIN_SDK_VERSION_MAJOR 9
#define PTRAIN_SDK_VERSION_MINOR 1
#define PTRAIN_SDK_VERSION_PATCH 0

#define PTRAIN_SDK_VERSION_STRING_DETAIL(x) #x
#define PTRAIN_SDK_VERSION_STRING(major, minor, patch) \
  PTRAIN_SDK_VERSION_STRING_DETAIL(major)              \
  "." PTRAIN_SDK_VERSION_STRING_DETAIL(minor) "." PTRAIN_SDK_VERSION_STRING_DETAIL(patch)

namespace ptrain::sdk {

// "MAJOR.MINOR.PATCH" of this SDK.
inline constexpr const char* kSdkVersion =
    PTRAIN_SDK_VERSION_STRING(PTRAIN_SDK_VERSION_MAJOR, PTRAIN_SDK_VERSION_MINOR, PTRAIN_SDK_VERSION_PATCH);

}  // namespace ptrain::sdk
