"""Compiled inference kernels (chains, min-cut on grids, per-example kernels) and their
validated Python wrappers."""
