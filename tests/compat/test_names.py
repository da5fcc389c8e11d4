"""PyCA's Python names (PyCA.Core and PyCA.Common) exist in pyca under the same spelling.

The inventory is PyCA's public headers (Opers namespace: image, field and image-field operations,
reductions, filters, memory management, the multi-scale classes, CUDA utilities), PyCA.Common and
PyCA.Display. Every one is provided (docs/pyca-migration.md lists what each maps to).
"""
import pytest

import pyca as ca
import pyca.common as common

TYPES_AND_CONSTANTS = [
    "Vec3Df", "Vec3Di", "GridInfo", "Image3D", "Field3D", "MEM_HOST", "MEM_HOST_PINNED", "MEM_DEVICE",
    "BACKGROUND_STRATEGY_PARTIAL_ID", "BACKGROUND_STRATEGY_ID", "BACKGROUND_STRATEGY_PARTIAL_ZERO",
    "BACKGROUND_STRATEGY_ZERO", "BACKGROUND_STRATEGY_CLAMP", "BACKGROUND_STRATEGY_WRAP", "BACKGROUND_STRATEGY_VAL",
    "INTERP_NN", "INTERP_LINEAR", "INTERP_CUBIC", "DEFAULT_INTERP_METHOD", "DIM_X", "DIM_Y", "DIM_Z",
    "DIFF_FORWARD", "DIFF_BACKWARD", "DIFF_CENTRAL", "BC_APPROX", "BC_WRAP", "BC_CLAMP",
    "GetNumberOfCUDADevices", "GaussianFilterCPU", "GaussianFilterGPU", "FluidKernelFFTCPU", "FluidKernelFFTGPU",
    "SetCUDADevice", "GetCUDADevice", "CheckCUDAError", "MultiscaleManager", "MultiscaleResamplerCPU",
    "MultiscaleResamplerGPU", "MultiscaleResamplerGaussCPU", "MultiscaleResamplerGaussGPU",
]

_UNARY = ["Abs", "Cube", "Exp", "Log", "Neg", "Ramp", "Sgn", "Step", "Sqr", "Sqrt", "Inv", "Ceil", "Floor", "Round",
          "Sin", "Asin", "Cos", "Acos", "Tan", "Atan", "Csc", "Sec", "Cot"]
_BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Atan2", "GT", "GTE", "EQ", "NEQ", "LT", "LTE"]
_FUSED = ["PowC", "AbsDiff", "SqrDiff", "MulMulC", "MulMul", "MulAdd", "MulSub", "AddMul", "AddDiv", "SubMul",
          "SubDiv", "MulCAdd", "MulCSub", "MulCAddC", "AddMulC", "SubMulC", "AddCMulC", "Add_MulC", "Add_Mul",
          "Sub_Mul", "Add_AddMulC", "Add_SubMulC", "Add_MulMulC", "Sub_AddMulC", "Sub_SubMulC", "Sub_MulMulC",
          "MulC_Add_MulC", "AddCMulCAddC", "Shrink", "SoftAbs", "SoftSgn"]
OPERATIONS = (
    ["Copy", "SetMem"]
    + [n + s for n in _UNARY for s in ("", "_I")]
    + [n + s for n in _BINARY for s in ("", "_I", "C", "C_I")]
    + [n + s for n in _FUSED for s in ("", "_I")]
    + ["SubVol", "SetSubVol_I", "Resample", "ResampleWorld", "SplatWorld", "Convolve",
       # image-field
       "ApplyH", "ApplyV", "ApplyVInv", "Splat", "FiniteDiff", "Gradient", "GradientMask", "GradientMag",
       "UpwindDiff", "UpwindGradMag", "Divergence", "Magnitude", "SqrMagnitude", "ComponentDotProd", "JacDetH",
       "JacDetV",
       # field
       "ComposeHH", "ComposeVH", "ComposeVInvH", "ComposeHV", "ComposeHVInv", "Jacobian", "NormalizeSafe",
       "NormalizeSafe_I", "Ad", "CoAd", "SetToIdentity", "HtoV", "HtoV_I", "VtoH", "VtoH_I",
       "AdInf", "CoAdInf", "DivergenceTensor", "JacobianXY", "JacobianXtY", "GradFor", "GradForMag", "DivBack",
       "JacDetVInv", "SetToZero", "ComposeTranslation", "SplatField", "ReprojectToUnitVec", "FixedPointInverse",
       "UpdateInverse", "Gradient2", "ShiftCoordinate",
       # reductions
       "Sum", "SumComp", "Sum2", "Max", "Min", "MinMax", "LInf", "L1", "Dot"]
)

COMMON = ["ImFromNPArr", "FieldFromNPArr", "AsNPCopy", "IsImage3D", "IsField3D", "CopyDataFromNPArr", "RandImage",
          "RandUnifImage", "RandField", "LoadITKImage", "SaveITKImage", "LoadITKField", "SaveITKField", "ReadGrid",
          "LoadPNGImage", "SavePNGImage", "ExtractROI", "ExtractSliceArr", "ExtractSliceIm", "ExtractSliceArrIm",
          "ExtractSliceVF", "ExtractSliceArrVF", "ComposeDef", "SaveSliceStack", "Distribute", "Mkdir_p",
          "TukeyWindow", "TukeyWindow1D", "AddWhiteNoise", "GaussianBlur", "DrawEllipse", "GetNumberOfCUDADevices",
          "CheckCUDAError", "DebugHere", "GetOuterFrame", "PyCAVersion", "PyCAVersionMajor", "PyCAVersionMinor",
          "PyCACommit", "PyCABranch", "SaveImageNPY", "LoadImageNPY", "SaveImageNPZ", "LoadImageNPZ", "SaveFieldNPZ",
          "LoadFieldNPZ", "SaveImage", "LoadImage", "SaveField", "LoadField"]

DISPLAY = ["DispImage", "GridPlot", "JacDetPlot", "JacDetCMap", "Quiver", "EnergyPlot", "SaveSlice", "SaveThreePaneArr",
           "DefSeriesIter", "ExtractSliceFunc", "GenDefFrames", "SampleCMap"]

@pytest.mark.parametrize("name", TYPES_AND_CONSTANTS + sorted(set(OPERATIONS)))
def test_core_name(name):
    assert hasattr(ca, name), f"pyca lacks PyCA's {name}"


@pytest.mark.parametrize("name", COMMON)
def test_common_name(name):
    assert hasattr(common, name), f"pyca.common lacks PyCA.Common's {name}"


@pytest.mark.parametrize("name", ["ManagedImage3D", "ManagedField3D", "ThreadMemoryManager", "MemoryManager"])
def test_memory_manager_names(name):
    assert hasattr(common, name)
    assert hasattr(ca, name), f"pyca lacks PyCA's top-level {name} (pyca.common has it)"


@pytest.mark.parametrize("name", DISPLAY)
def test_display_name(name):
    import pyca.display as display

    assert callable(getattr(display, name)), f"pyca.display lacks PyCA.Display's {name}"
