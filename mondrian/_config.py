"""Constants of the Mondrian kernels: node statistics and the prediction kernels' flags.

The flags of every kernel are :data:`basics.jit.JIT`; the flat-tree index dtype and
missing-node mark are :mod:`basics.flat_tree`'s.
"""

from __future__ import annotations

from basics.jit import JIT

#: Statistics kept per node by regression Mondrian trees: ``stats[j] = (n_j, sum y, sum y^2)``.
NODE_REG_STATS = 3

#: Prediction kernels may reassociate sums (the distance to a block is a sum over features,
#: which then vectorises); no flag that assumes finite values (split times can be inf).
PREDICT_JIT = dict(JIT, fastmath={"reassoc", "nsz", "contract"})
