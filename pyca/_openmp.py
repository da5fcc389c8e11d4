"""OpenMP settings that must be made before the core library loads the OpenMP runtime (imported by
pyca/__init__.py before pyca.core).

Threads of pyca's CPU loops sleep while they wait for work (OMP_WAIT_POLICY=passive) instead of
spinning, the GNU runtime's default. On a machine whose cores are busy with other processes (CI, a
shared server) a spinning thread takes a core from the thread the whole team is waiting for, and
every one of the thousands of parallel loops of a registration pays for it: the default `pyca lddmm`
registered 4.7x slower than on one thread on a loaded 2-core machine (189 s against 40 s), and about
as fast as one thread once the threads sleep (docs/performance.md, "Threads on small grids"). A
choice of the user's (OMP_WAIT_POLICY or GOMP_SPINCOUNT set) is kept. How many threads a loop gets
is the core's detail::threadsFor (core/include/pyca/detail/parallel.h).
"""
import os

if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "passive"
