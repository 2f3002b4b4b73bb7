"""Training health, recorded by the memory profiler beside memory: gradient flow
(norms, zero gradients, clipping, the update/weight ratio), NaN/Inf forensics, and timed
sections of the iteration. ``MemoryProfiler`` drives each of them; the non-finite names
users call directly are re-exported as ``gpuscope.NonfiniteError``, ``NonfiniteFinding``
and ``find_nonfinite``."""
