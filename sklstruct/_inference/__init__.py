"""Compiled inference kernels for chains and their validated Python wrappers."""
