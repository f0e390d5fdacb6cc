#include "backends/cuda/driver_api.h"

#include <cuda_runtime.h>

#include <string>

namespace cellm {
namespace {

template <typename Fn>
Status resolve(const char* symbol, unsigned int version, Fn* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found);
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return failed_precondition(std::string("CUDA driver function ") + symbol +
                               " is not available: " + cudaGetErrorString(error));
  }
  *out = reinterpret_cast<Fn>(fn);
  return ok_status();
}

StatusOr<DriverApi> load() {
  DriverApi api;
  CELLM_RETURN_IF_ERROR(
      resolve("cuMemGetAllocationGranularity", 12000, &api.mem_get_allocation_granularity));
  CELLM_RETURN_IF_ERROR(resolve("cuMemAddressReserve", 12000, &api.mem_address_reserve));
  CELLM_RETURN_IF_ERROR(resolve("cuMemAddressFree", 12000, &api.mem_address_free));
  CELLM_RETURN_IF_ERROR(resolve("cuMemCreate", 12000, &api.mem_create));
  CELLM_RETURN_IF_ERROR(resolve("cuMemRelease", 12000, &api.mem_release));
  CELLM_RETURN_IF_ERROR(resolve("cuMemMap", 12000, &api.mem_map));
  CELLM_RETURN_IF_ERROR(resolve("cuMemUnmap", 12000, &api.mem_unmap));
  CELLM_RETURN_IF_ERROR(resolve("cuMemSetAccess", 12000, &api.mem_set_access));
  CELLM_RETURN_IF_ERROR(resolve("cuGetErrorName", 12000, &api.get_error_name));
  CELLM_RETURN_IF_ERROR(resolve("cuGetErrorString", 12000, &api.get_error_string));
  return api;
}

}  // namespace

StatusOr<const DriverApi*> driver_api() {
  static const StatusOr<DriverApi> api = load();
  if (!api.ok()) return api.status();
  return &api.value();
}

}  // namespace cellm
