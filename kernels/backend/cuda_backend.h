// The cuda backend on a caller's stream (the engine's): every kernel it runs is enqueued
// on `stream`, which it uses but does not own; its arena and scratch live as long as it
// does. make_cuda_backend (backend.h) makes one with a stream of its own. cuda builds only.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "kernels/backend/backend.h"

namespace kc {

std::unique_ptr<Backend> make_cuda_backend_on(cudaStream_t stream, Status* st);

}  // namespace kc
