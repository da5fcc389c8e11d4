#!/usr/bin/env python3
"""LDDMM image matching (Beg et al. 2005), written as a PyCA script.

The PyCA original ran after changing only the imports:
    import PyCA.Core as ca        ->  import pyca as ca
    import PyCA.Common as common  ->  import pyca.common as common

Matches an ellipse to a rotated, shifted ellipse on a 2-D grid with anisotropic spacing by gradient
descent on time-dependent velocity fields v_t (t = 0 .. T-1):
    E(v) = 1/2 sum_t <L v_t, v_t> dt + 1/sigma^2 ||I0 o phi_1^-1 - I1||^2
with the fluid operator L = -alpha Lap - beta grad div + gamma (FluidKernelFFT).

Usage: lddmm_image_matching.py [host|device] [nIter]
(default: the GPU when there is one, as PyCA scripts chose with GetNumberOfCUDADevices).
"""
import sys

import numpy as np

import pyca as ca
import pyca.common as common


def MakeImages(sz, sp, mType):
    """Two blurred ellipses (template and target) as Image3Ds."""
    x, y = np.meshgrid(np.arange(sz[0]), np.arange(sz[1]), indexing="ij")
    c = np.array(sz) / 2.0
    I0Arr = common.DrawEllipse(sz, c, sz[0] / 4.0, sz[1] / 3.0)
    th = 0.3
    xr = (x - c[0] - 2) * np.cos(th) + (y - c[1] + 1) * np.sin(th)
    yr = -(x - c[0] - 2) * np.sin(th) + (y - c[1] + 1) * np.cos(th)
    I1Arr = ((xr / (sz[0] / 3.2)) ** 2 + (yr / (sz[1] / 3.6)) ** 2 <= 1.0).astype(float)
    I0 = common.ImFromNPArr(common.GaussianBlur(I0Arr, 1.5), mType, sp=sp)
    I1 = common.ImFromNPArr(common.GaussianBlur(I1Arr, 1.5), mType, sp=sp)
    return I0, I1


class LDDMM:
    def __init__(self, I0, I1, nTimeSteps=5, alpha=1.0, beta=0.0, gamma=0.05, sigma=0.1, stepSize=0.005):
        self.I0, self.I1 = I0, I1
        self.grid = I0.grid()
        self.mType = I0.memType()
        self.T = nTimeSteps
        self.dt = 1.0 / nTimeSteps
        self.sigma = sigma
        self.eps = stepSize
        grid, mType = self.grid, self.mType
        # velocity fields, forward deformations phi_t^-1 and backward ones phi_{t,1}
        self.v = [ca.Field3D(grid, mType) for _ in range(self.T)]
        for v in self.v:
            ca.SetMem(v, 0.0)
        self.phiinv = [ca.Field3D(grid, mType) for _ in range(self.T + 1)]
        self.phi1 = [ca.Field3D(grid, mType) for _ in range(self.T + 1)]
        self.It = [ca.Image3D(grid, mType) for _ in range(self.T + 1)]
        if mType == ca.MEM_DEVICE:
            self.diffOp = ca.FluidKernelFFTGPU()
        else:
            self.diffOp = ca.FluidKernelFFTCPU()
        self.diffOp.setAlpha(alpha)
        self.diffOp.setBeta(beta)
        self.diffOp.setGamma(gamma)
        self.diffOp.setGrid(grid)

    def Forward(self):
        """phi_t^-1 and I_t = I0 o phi_t^-1 for t = 0 .. T."""
        vdt = ca.ManagedField3D(self.grid, self.mType)
        ca.SetToIdentity(self.phiinv[0])
        ca.Copy(self.It[0], self.I0)
        for t in range(self.T):
            ca.MulC(vdt, self.v[t], self.dt)
            # phi_{t+1}^-1 = phi_t^-1 o (id - v_t dt)
            ca.ComposeHVInv(self.phiinv[t + 1], self.phiinv[t], vdt)
            ca.ApplyH(self.It[t + 1], self.I0, self.phiinv[t + 1])

    def Backward(self):
        """phi_{t,1} = phi_{t+1,1} o (id + v_t dt), phi_{1,1} = id."""
        vdt = ca.ManagedField3D(self.grid, self.mType)
        ca.SetToIdentity(self.phi1[self.T])
        for t in range(self.T - 1, -1, -1):
            ca.MulC(vdt, self.v[t], self.dt)
            ca.ComposeHV(self.phi1[t], self.phi1[t + 1], vdt)

    def Energy(self):
        Lv = ca.ManagedField3D(self.grid, self.mType)
        vecEnergy = 0.0
        for v in self.v:
            self.diffOp.applyOperator(Lv, v)
            vecEnergy += 0.5 * ca.Dot(Lv, v) * self.dt
        diff = self.It[self.T] - self.I1
        imageEnergy = ca.Sum2(diff) / self.sigma ** 2
        return vecEnergy + imageEnergy, imageEnergy

    def Step(self):
        self.Forward()
        self.Backward()
        grid, mType = self.grid, self.mType
        Jt = ca.ManagedImage3D(grid, mType)
        jac = ca.ManagedImage3D(grid, mType)
        gI = ca.ManagedField3D(grid, mType)
        gE = ca.ManagedField3D(grid, mType)
        for t in range(self.T):
            # J_t = I1 o phi_{t,1}, with the Jacobian determinant of phi_{t,1}
            ca.ApplyH(Jt, self.I1, self.phi1[t])
            ca.JacDetH(jac, self.phi1[t])
            # b_t = |D phi_{t,1}| (I_t - J_t) grad(I_t)
            ca.Sub(Jt, self.It[t], Jt)  # I_t - J_t
            Jt *= jac
            ca.Gradient(gI, self.It[t])
            gI *= Jt
            # grad E = v_t - 2 / sigma^2 K b_t
            self.diffOp.applyInverseOperator(gE, gI)
            gE *= -2.0 / self.sigma ** 2
            gE += self.v[t]
            ca.Add_MulC_I(self.v[t], gE, -self.eps)
        self.Forward()
        return self.Energy()


def main(argv):
    if len(argv) > 1:
        mType = ca.MEM_DEVICE if argv[1] == "device" else ca.MEM_HOST
    else:
        mType = ca.MEM_DEVICE if ca.GetNumberOfCUDADevices() > 0 else ca.MEM_HOST
    nIter = int(argv[2]) if len(argv) > 2 else 40
    sz = [48, 52]
    sp = ca.Vec3Df(1.5, 2.1, 1.0)
    grid = ca.GridInfo(ca.Vec3Di(sz[0], sz[1], 1), sp)
    ca.ThreadMemoryManager.init(grid, mType, 8)

    I0, I1 = MakeImages(sz, sp, mType)
    lddmm = LDDMM(I0, I1)
    lddmm.Forward()
    E0, imE0 = lddmm.Energy()
    print(f"memory {ca.memTypeName(mType)}, grid {sz}, spacing {sp.tolist()}")
    print(f"iter   0  energy {E0:10.4f}  image term {imE0:10.4f}")
    energies = [E0]
    for it in range(1, nIter + 1):
        E, imE = lddmm.Step()
        energies.append(E)
        if it % 10 == 0 or it == nIter:
            print(f"iter {it:3d}  energy {E:10.4f}  image term {imE:10.4f}")

    # the deformed template is closer to the target, and the deformation stays invertible
    jac = ca.Image3D(grid, mType)
    ca.JacDetH(jac, lddmm.phiinv[lddmm.T])
    jmin, jmax = ca.MinMax(jac)
    print(f"Jacobian determinant of phi_1^-1 in [{jmin:.3f}, {jmax:.3f}]")
    final = common.AsNPCopy(lddmm.It[lddmm.T])
    err0 = np.abs(common.AsNPCopy(I0) - common.AsNPCopy(I1)).sum()
    err1 = np.abs(final - common.AsNPCopy(I1)).sum()
    print(f"L1 image error: {err0:.2f} before, {err1:.2f} after")
    ca.ThreadMemoryManager.destroy()
    ok = energies[-1] < 0.7 * energies[0] and err1 < 0.7 * err0 and jmin > 0.0
    print("LDDMM matching", "converged" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
