// PyCA's enumerations, with PyCA's names and meanings (docs/operations.md defines each).
#pragma once

namespace pyca {

// What an interpolation returns for samples whose neighbours lie outside the grid.
enum BackgroundStrategy {
  BACKGROUND_STRATEGY_PARTIAL_ID = 0,  // outside neighbours take the identity (H-fields)
  BACKGROUND_STRATEGY_ID,              // any outside neighbour: the result is the identity
  BACKGROUND_STRATEGY_PARTIAL_ZERO,    // outside neighbours are 0
  BACKGROUND_STRATEGY_ZERO,            // any outside neighbour: the result is 0
  BACKGROUND_STRATEGY_CLAMP,           // coordinates clamped to the border voxel
  BACKGROUND_STRATEGY_WRAP,            // periodic
  BACKGROUND_STRATEGY_VAL,             // any outside neighbour: the result is a given value
};

enum InterpT {
  INTERP_NN = 0,  // nearest neighbour
  INTERP_LINEAR,  // trilinear (bilinear on 2-D grids)
  INTERP_CUBIC,   // Catmull-Rom cubic
};
constexpr InterpT DEFAULT_INTERP_METHOD = INTERP_LINEAR;

enum DimT { DIM_X = 0, DIM_Y, DIM_Z };
enum DiffT { DIFF_FORWARD = 0, DIFF_BACKWARD, DIFF_CENTRAL };
// Boundary conditions of finite differences.
enum BoundaryCondT {
  BC_APPROX = 0,  // one-sided differences at the border
  BC_WRAP,        // periodic
  BC_CLAMP,       // the value beyond the border equals the border value
};

}  // namespace pyca
