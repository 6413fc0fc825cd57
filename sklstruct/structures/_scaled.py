"""Structures whose joint feature map is rescaled component-wise.

``scaled_structure(structure, unary_scale, pairwise_scale)`` returns a copy of ``structure``
whose joint feature is ``s * Psi(x, y)`` for fixed scales ``s`` (a zero drops the component).
An L2 learner on the scaled structure solves ``min 1/2 ||g||^2 + C sum_i H_i(s * g)``: the
M-step of the adaptive (EM-style) l1 learner (Zhu, Xing and Zhang 2008, problem (5)).

The weights ``g`` are read through :meth:`split_weights` (which returns the effective weights
``s * g``, so potentials and oracles see ``s * g``) and joint features are built by
:meth:`unary_features` and :meth:`pairwise_statistics` (scaled). Such a structure has no
compiled per-example kernels (their passes assume the unscaled unary feature map).
"""

import numpy as np


class _ScaledJointFeature:
    """Mixin over a structure class; ``unary_scale_`` is (n_features, n_states)."""

    def bind(self, *args, **kwargs):
        bound = super().bind(*args, **kwargs)
        bound.unary_scale_ = self.unary_scale_
        bound.pairwise_scale_ = self.pairwise_scale_
        return bound

    def split_weights(self, w):
        WT, theta = super().split_weights(w)
        return WT * self.unary_scale_, theta * self.pairwise_scale_

    def unary_features(self, batch, token_state_weights):
        return super().unary_features(batch, token_state_weights) * self.unary_scale_

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        stats = super().pairwise_statistics(batch, Y, weights=weights, per_sequence=per_sequence)
        return stats * self.pairwise_scale_

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        # the expected pairwise statistics are those of the scaled statistics
        node, pair, log_z = super().marginals(batch, unary, pairwise, n_jobs=n_jobs)
        return node, np.asarray(pair) * self.pairwise_scale_, log_z

    def summed_marginals(self, batch, unary, pairwise, n_jobs=None):
        node, pair, log_z = super().summed_marginals(batch, unary, pairwise, n_jobs=n_jobs)
        return node, pair * self.pairwise_scale_, log_z

    def pairwise_scores(self, batch, Y, pairwise):
        # potentials are effective parameters: they score the unscaled statistics
        return super().pairwise_statistics(batch, Y, per_sequence=True) @ pairwise

    def example_kernels(self, batch):
        return None


_CLASSES = {}


def scaled_structure(structure, unary_scale, pairwise_scale):
    """A copy of ``structure`` (bound or not) with its joint features scaled."""
    cls = type(structure)
    if cls not in _CLASSES:
        _CLASSES[cls] = type("Scaled" + cls.__name__, (_ScaledJointFeature, cls), {})
    scaled = _CLASSES[cls](**structure.get_params(deep=False))
    scaled.__dict__.update({k: v for k, v in vars(structure).items() if k.endswith("_")})
    scaled.unary_scale_ = np.asarray(unary_scale, dtype=np.float64)
    scaled.pairwise_scale_ = np.asarray(pairwise_scale, dtype=np.float64)
    return scaled
