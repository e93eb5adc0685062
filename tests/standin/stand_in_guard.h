// The stand-in device's device and stream guard: one device, one stream on
// which everything has already happened (its kernels are the CPU's and run
// synchronously). The autograd engine of LibTorch 2.x asks a device for its
// default stream during every backward; the no-op guard LibTorch offers
// refuses that.
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace ptrain::standin {

class StandInGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device) const override { return device(); }
  c10::Device getDevice() const override { return device(); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }

  // noexcept: LibTorch 1.13 declares these noexcept, 2.x does not.
  c10::Stream getStream(c10::Device) const noexcept override { return stream(); }
  c10::Stream exchangeStream(c10::Stream) const noexcept override { return stream(); }
  c10::Stream getDefaultStream(c10::Device) const override { return stream(); }
  c10::Stream getStreamFromGlobalPool(c10::Device, bool) const override { return stream(); }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}

  // Events on the one stream: recorded as soon as they are.
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}

 private:
  static c10::Device device() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
  static c10::Stream stream() { return c10::Stream(c10::Stream::DEFAULT, device()); }
};

}  // namespace ptrain::standin
