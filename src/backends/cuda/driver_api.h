// driver_api: the few CUDA driver functions cellm calls (virtual memory management, error
// names), looked up at run time through the runtime (cudaGetDriverEntryPointByVersion) instead
// of linked, so binaries that contain the CUDA backend still start on machines without a GPU
// driver (CI): there the lookup fails with a Status and nothing aborts.
// Thread-safety: driver_api() resolves once (thread-safe static); the table is immutable.
#pragma once

#include <cuda.h>

#include "core/status.h"

namespace cellm {

struct DriverApi {
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
};

// The resolved table, or why it could not be resolved (no driver, too old a driver).
StatusOr<const DriverApi*> driver_api();

}  // namespace cellm
