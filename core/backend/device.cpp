#include "core/backend/device.h"

#include <algorithm>
#include <mutex>

#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/memory/process_memory.h"

namespace ferry {
namespace {

// Registered providers. A function-local static: registrars run during static initialisation,
// in an order no translation unit controls.
struct Registry {
  std::mutex mutex;
  std::vector<DeviceProvider> providers;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::optional<DeviceProvider> provider_for(Device kind) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const DeviceProvider& p : r.providers) {
    if (p.kind == kind) return p;
  }
  return std::nullopt;
}

const char* cpu_architecture() {
#if defined(__x86_64__) || defined(_M_X64)
  return "x86-64";
#elif defined(__aarch64__) || defined(_M_ARM64)
  return "arm64";
#else
  return "unknown";
#endif
}

// "CUDA" for Device::kCuda: how a user knows the backend.
std::string kind_label(Device kind) {
  std::string label(device_name(kind));
  for (char& c : label) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return label;
}

DeviceMemory system_memory() {
  const memory::SystemMemory ram = memory::sample_system_memory();
  return DeviceMemory{ram.total_bytes, ram.available_bytes};
}

}  // namespace

void register_device_provider(const DeviceProvider& provider) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto same = std::find_if(r.providers.begin(), r.providers.end(),
                                 [&](const DeviceProvider& p) { return p.kind == provider.kind; });
  if (same != r.providers.end()) {
    *same = provider;
  } else {
    r.providers.push_back(provider);
  }
}

bool has_device_provider(Device kind) {
  return kind == Device::kCpu || provider_for(kind).has_value();
}

DeviceProperties cpu_device() {
  DeviceProperties d;
  d.kind = Device::kCpu;
  d.name = "CPU";
  d.architecture = cpu_architecture();
  try {
    d.memory = system_memory();
  } catch (const Error&) {
    // Unknown RAM: the presets' own budgets still apply.
  }
  d.capabilities = kHostCapabilities;
  return d;
}

std::vector<DeviceProperties> list_devices() {
  std::vector<DeviceProperties> devices{cpu_device()};
  std::vector<DeviceProvider> providers;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    providers = r.providers;
  }
  for (const DeviceProvider& p : providers) {
    std::string why;
    for (DeviceProperties& d : p.list(why)) devices.push_back(std::move(d));
  }
  return devices;
}

std::optional<DeviceProperties> find_device(Device kind, std::string* why) {
  if (kind == Device::kCpu) return cpu_device();
  const std::optional<DeviceProvider> provider = provider_for(kind);
  std::string reason;
  if (!provider) {
    reason = "this build of Ferry has no " + kind_label(kind) + " backend";
  } else {
    std::vector<DeviceProperties> devices = provider->list(reason);
    if (!devices.empty()) return std::move(devices.front());
    if (reason.empty()) reason = "no device was found";
  }
  if (why != nullptr) *why = std::move(reason);
  return std::nullopt;
}

std::unique_ptr<Backend> create_backend(const DeviceProperties& device) {
  if (device.kind == Device::kCpu) return std::make_unique<cpu::CpuBackend>();
  const std::optional<DeviceProvider> provider = provider_for(device.kind);
  if (!provider) {
    throw Error(ErrorCode::kUnsupported, "this build of Ferry cannot run on " + device.name);
  }
  return provider->create(device);
}

DeviceMemory sample_device_memory(const DeviceProperties& device) {
  if (device.kind == Device::kCpu) return system_memory();
  const std::optional<DeviceProvider> provider = provider_for(device.kind);
  if (!provider) {
    throw Error(ErrorCode::kUnsupported, "this build of Ferry cannot query " + device.name);
  }
  return provider->sample_memory(device);
}

}  // namespace ferry
