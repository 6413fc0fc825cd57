"""Training on a dask cluster: data shards that stay on the workers for the whole fit.

The 1-slack cutting-plane algorithm (Joachims, Finley and Yu 2009, Algorithms 3 and 4) spends
its time in one loop over the training examples followed by a sum: every iteration runs
loss-augmented decoding on each example and adds up the joint-feature differences, losses and
hinge terms (the paper's section 4, "Parallelization"). That loop is a map-reduce over data
shards. :class:`ShardedSequences` puts the training data on the workers of a
``dask.distributed`` cluster once, in shards, each held by a dask actor on the worker that
holds its data; :meth:`StructSVMCuttingPlane.fit <sklstruct.StructSVMCuttingPlane.fit>` given
a :class:`ShardedSequences` then runs every iteration as

1. the client sends the current weights ``w`` to every shard (8 bytes per parameter);
2. each shard computes its potentials and the hinge terms of the labellings in its own label
   cache, and returns their weighted sum;
3. if the summed cached constraint is violated enough, the client asks the shards for it;
   otherwise each shard runs the compiled loss-augmented decoding on its sequences (on the
   potentials it already has). Either way a shard returns the summed joint-feature
   difference of its sequences (dense, or sparse when the parameter vector is large), its
   summed loss and its summed hinge terms;
4. the client adds the shards' answers up and solves the small working-set QP.

The shards are never sent again: a fit moves ``w`` out and one direction per shard back per
iteration (two round trips when the cache is tried, one before the cache is filled), and the
label caches stay with their shards.

**Why the data decide.** scikit-learn estimators take configuration in ``__init__`` and data
in ``fit``; a live ``Client`` as an estimator parameter would break ``clone``, pickling and
``GridSearchCV``. dask-ml's convention is the same: its estimators run on the cluster because
their input is a dask collection, and they use the client that holds it. So the distributed
fit is chosen by the type of ``X``: a :class:`ShardedSequences` (made with the client of
your choice, the default client otherwise). ``joblib.parallel_backend("dask")`` is the right
tool for the other kind of parallelism, whole fits in parallel (``GridSearchCV(n_jobs=-1)``,
``cross_validate``), and needs nothing from sklstruct; it cannot keep data on the workers
between the iterations of one fit, since joblib ships each task's arguments with the task.

**Same model.** With one shard the distributed fit performs the single-machine fit's
arithmetic in the same order and returns the same weights bit for bit (when the parameter
vector is at most ``2**16`` doubles, where the single-machine fit keeps its constraints as
dense vectors as well). With several shards the sums over the examples are added shard by
shard, so they are rounded differently and the two fits follow slightly different paths:
both stop at a certified relative duality gap of at most ``tol``, so their objectives agree
within ``tol`` times the primal objective and their weights within ``sqrt(2 gap)`` of the
optimum each. The placement of the shards on workers changes nothing: the same shards give
the same model bit for bit on any cluster.

**Worker failure.** A shard lives with its actor in one worker's memory. If that worker dies
during a fit, the fit stops with a :class:`ShardLostError` naming the shard and the worker
(the estimator keeps its previous state, as after any failed fit); the other shards stay on
their workers. Call :meth:`ShardedSequences.restore` to rebuild the lost shards (shards made
by :meth:`ShardedSequences.from_delayed` or :meth:`ShardedSequences.from_bag` are recomputed
by dask from their recipe; scattered shards are scattered again from the data given to
:meth:`ShardedSequences.restore`) and fit again.
"""

from .learners.cutting_plane._sharded import ShardedSequences, ShardLostError

__all__ = ["ShardLostError", "ShardedSequences"]
