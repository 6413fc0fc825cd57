"""Optimisation cores shared by the learners: the capped-simplex QP (SMO), the working-set LP
(HiGHS) and the Euclidean projection onto the l1 ball."""
