"""What every layer shares, once, at the bottom (``docs/architecture.md``: imports point down).

Nothing here imports ``ebf``, ``mondrian``, ``pipelines``, ``cluster`` or Dask; each module
is named for what it holds:

``mixture``     the predictive Gaussian mixture every regressor returns, and its one-pass
                summary (mean, std, quantiles); its numba kernels in ``mixture_kernels``
``jit``         the numba flags of every kernel (``basics``, ``mondrian``, ``ebf``)
``flat_tree``   flat binary trees: index dtype, ``NO_NODE``, preorder, the structure check
``levels``      the one check of probability levels (quantiles, interval coverages)
``predictive``  the predictive API of every estimator, over one mixture per block of rows
``metrics``     RMSE, NLPD, coverage and calibration tables of predictive distributions
``scores``      one record per score, read by every scorer
``discrete``    integer-valued targets: when a target is one, and its ranked probability score
``validation``  input checks whose errors name the column, the count and the fix
``bounds``      the range of every float a saved model stores, checked when it is loaded
``columns``     the column-kind vocabulary (pandas and Arrow dtypes) and how models encode it
``seeds``       ``random_state`` to a stored integer seed, and the seed tree of every model
``threads``     ``n_jobs`` to a number of threads
``tasks``       the task names and their integer codes in numba kernels
``places``      paths on the local file system or fsspec alike; small files read within a
                limit
``locations``   where outputs may be written and which may be replaced (the output policy)
``atomic``      atomic writes: single files (bytes, text, JSON) and output directories
``versions``    the installed version of the library
"""
