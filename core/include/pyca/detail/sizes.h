// Checked size arithmetic. Every product that sizes memory, a loop or a launch goes through these
// helpers (or is bounded by kMaxVoxels first), so that a size arriving from a file or a command line
// raises a named error instead of wrapping around. The rules: docs/design/errors.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pyca {

// Largest voxel count of a grid: 2^40 (about 1.1e12 voxels; 4 TiB as an Image3D, 12 TiB as a
// Field3D). Every later product of a voxel count (x 3 components, x 4 bytes, x 2 for complex FFT
// buffers, + alignment) stays below 2^46, far from size_t and ptrdiff_t overflow.
constexpr std::uint64_t kMaxVoxels = std::uint64_t(1) << 40;
// Largest single allocation pyca asks for, in bytes (2^50: beyond any machine, below overflow).
constexpr std::size_t kMaxAllocBytes = std::size_t(1) << 50;

namespace detail {

// a * b, or ValueError "op: 'what' of a x b ... exceeds limit" when it would exceed `limit`
// (the product is computed without overflow).
std::size_t checkedMul(std::size_t a, std::size_t b, const char* op, const char* what,
                       std::size_t limit = SIZE_MAX);
// nx * ny * nz of a size (each >= 0), or ValueError naming `op` and `what` when it exceeds `limit`.
std::uint64_t checkedVoxels(long long nx, long long ny, long long nz, const char* op, const char* what,
                            std::uint64_t limit = kMaxVoxels);

}  // namespace detail
}  // namespace pyca
