#include "device_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace ptrain::standin {
namespace {

// Address space only: neither range costs memory until the shadow is written.
constexpr size_t kReservedBytes = size_t{256} << 30;
// The shadow becomes writable in steps of this much (a strict overcommit
// policy charges only what is writable).
constexpr size_t kCommitStep = size_t{256} << 20;
// Blocks come in powers of two from this size, so freed ones are reused.
constexpr size_t kSmallestBlock = 512;
// Freed blocks from this size give their pages back.
constexpr size_t kReturnPagesFrom = size_t{1} << 20;

size_t size_class(size_t bytes) {
  size_t size = kSmallestBlock;
  while (size < bytes) size <<= 1;
  return size;
}

uint8_t* reserve(size_t bytes, const char* what) {
  void* range = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) {
    throw std::runtime_error(std::string("stand-in device: cannot reserve its ") + what +
                             " address range: " + std::strerror(errno));
  }
  return static_cast<uint8_t*>(range);
}

}  // namespace

DeviceArena& DeviceArena::instance() {
  static DeviceArena* arena = new DeviceArena();
  return *arena;
}

DeviceArena::DeviceArena()
    : device_base_(reserve(kReservedBytes, "device")),
      shadow_base_(reserve(kReservedBytes, "shadow")),
      reserved_(kReservedBytes) {}

void* DeviceArena::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t offset = 0;
  auto free_list = free_by_size_.find(size);
  if (free_list != free_by_size_.end() && !free_list->second.empty()) {
    offset = free_list->second.back();
    free_list->second.pop_back();
  } else {
    if (bump_ + size > reserved_) throw std::bad_alloc();
    offset = bump_;
    bump_ += size;
    commit_through(bump_);
  }
  block_size_[offset] = size;
  live_bytes_ += static_cast<int64_t>(size);
  return device_base_ + offset;
}

void DeviceArena::release(void* device_address) {
  if (device_address == nullptr) return;
  const auto offset = static_cast<size_t>(static_cast<uint8_t*>(device_address) - device_base_);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto block = block_size_.find(offset);
  if (block == block_size_.end()) return;  // not ours: nothing to give back
  const size_t size = block->second;
  block_size_.erase(block);
  live_bytes_ -= static_cast<int64_t>(size);
  if (size >= kReturnPagesFrom) ::madvise(shadow_base_ + offset, size, MADV_DONTNEED);
  free_by_size_[size].push_back(offset);
}

bool DeviceArena::contains(const void* address) const {
  const auto* byte = static_cast<const uint8_t*>(address);
  return byte >= device_base_ && byte < device_base_ + reserved_;
}

void* DeviceArena::host_bytes(const void* device_address) const {
  return shadow_base_ + (static_cast<const uint8_t*>(device_address) - device_base_);
}

int64_t DeviceArena::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

void DeviceArena::commit_through(size_t end) {
  if (end <= committed_) return;
  const size_t target = (end + kCommitStep - 1) / kCommitStep * kCommitStep;
  if (::mprotect(shadow_base_ + committed_, target - committed_, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
  committed_ = target;
}

}  // namespace ptrain::standin
