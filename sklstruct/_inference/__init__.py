"""Compiled inference kernels (chains, min-cut on grids, dependency trees, per-example
kernels) and their validated Python wrappers."""
