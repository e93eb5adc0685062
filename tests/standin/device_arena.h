// The stand-in device's memory (docs/devices.md): addresses the host cannot
// read.
//
// The arena reserves one range of addresses with no access at all
// (PROT_NONE); the allocator hands those out as the device's pointers. Their
// bytes live at the same offset in a second, readable range, the shadow,
// which only the stand-in's copy kernels touch. So a device tensor's
// data_ptr() dereferenced on the host, an accessor over it or a memcpy from
// it faults, as it would on a GPU, and fault_report.h names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ptrain::standin {

class DeviceArena {
 public:
  // The process's arena, made on first use and never destroyed: tensors
  // freed by static destructors at exit still find it.
  static DeviceArena& instance();

  // A device address of at least `bytes` bytes, 64-byte aligned; nullptr for 0 bytes.
  void* allocate(size_t bytes);
  void release(void* device_address);

  // Whether `address` lies in the device range (allocated or not).
  bool contains(const void* address) const;
  // The readable shadow of a device address.
  void* host_bytes(const void* device_address) const;

  int64_t live_bytes() const;

 private:
  DeviceArena();
  void commit_through(size_t end);

  uint8_t* device_base_ = nullptr;
  uint8_t* shadow_base_ = nullptr;
  size_t reserved_ = 0;

  mutable std::mutex mutex_;
  size_t bump_ = 0;       // offset of the first never-used byte
  size_t committed_ = 0;  // the shadow is readable and writable below this offset
  int64_t live_bytes_ = 0;
  std::unordered_map<size_t, size_t> block_size_;       // offset -> its size class
  std::map<size_t, std::vector<size_t>> free_by_size_;  // size class -> free offsets
};

}  // namespace ptrain::standin
