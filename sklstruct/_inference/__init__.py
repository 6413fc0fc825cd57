"""Compiled inference kernels (chains, min-cut on grids and graphs, dependency trees, CKY for
grammars, trees and loopy graphs, per-example kernels) and their validated Python wrappers."""
